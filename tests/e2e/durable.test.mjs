// Durable sandboxes (issue 16) end to end over stdio with the official SDK
// client: a persistent sandbox keeps its files and packages across a clean
// restart and a kill -9 of the server, its first run afterwards says
// state_lost; pause (freeze in memory, or stop to disk) and resume; fork;
// ttl_action pause; close of a stopped sandbox deletes its disk; one server
// per state dir runs persistent sandboxes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { E2E_DIR } from './lib/harness.mjs';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

function startIndex() {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

// The server's process: the SDK's stdio transport keeps it here.
const serverPid = (sc) => sc.transport._process.pid;

async function killHard(sc) {
  const pid = serverPid(sc);
  const gone = new Promise((r) => sc.transport._process.once('exit', r));
  process.kill(pid, 'SIGKILL');
  await gone;
  await sc.close().catch(() => {});
}

const listed = async (sc, id) => (await sc.ok('list_sandboxes')).sandboxes.find((s) => s.sandbox_id === id);

describe('durable sandboxes', () => {
  let state, index, sc;
  const start = () => connectSandcastle({
    args: ['--state-dir', state.dir, '--pip-index-url', `http://127.0.0.1:${index.port}/simple/`],
    timeoutMs: 120000,
  });
  before(async () => {
    state = tempDir('sandcastle-durable-');
    index = await startIndex();
    sc = await start();
  });
  after(async () => {
    await sc?.close();
    index?.child.kill();
    state?.cleanup();
  });

  test('files, packages, id and name survive kill -9 of the server; the first run says state_lost', async () => {
    const s = await sc.create({ language: 'python', name: 'keep', persistent: true });
    assert.equal(s.persistent, true);
    const inst = await sc.ok('install_packages', { sandbox_id: 'keep', packages: ['sandcastle_demo==1.2.3'] });
    assert.equal(inst.status, 'success', JSON.stringify(inst));
    await sc.ok('write_file', { sandbox_id: 'keep', path: 'notes.txt', content: 'written before the crash\n' });
    const cmd = await sc.ok('execute_command', { sandbox_id: 'keep', command: 'echo from-a-command > cmd.txt' });
    assert.equal(cmd.exit_code, 0);
    const x = await sc.ok('execute_code', { sandbox_id: 'keep', code: 'x = 41\nprint(x)' });
    assert.equal(x.stdout, '41\n');
    assert.equal(x.state_lost, undefined);

    await killHard(sc);
    sc = await start();
    const after = await listed(sc, s.sandbox_id);
    assert.ok(after, 'listed after the restart');
    assert.equal(after.name, 'keep');
    assert.equal(after.status, 'stopped');
    assert.deepEqual(after.packages.map((p) => [p.name, p.status, p.version]), [['sandcastle_demo', 'success', '1.2.3']]);

    const run = await sc.ok('execute_code', {
      sandbox_id: 'keep',
      code: "import sandcastle_demo as d\nprint(open('notes.txt').read().strip(), open('cmd.txt').read().strip(), 'x' in globals(), d.VERSION)",
    });
    assert.equal(run.stdout, 'written before the crash from-a-command False 1.2.3\n', JSON.stringify(run));
    assert.equal(run.state_lost, true);
    const again = await sc.ok('execute_code', { sandbox_id: 'keep', code: 'print(2)' });
    assert.equal(again.state_lost, undefined, 'state_lost is said once');
    assert.equal((await listed(sc, s.sandbox_id)).status, 'running');
  });

  test('a clean restart keeps a persistent sandbox and ends an ephemeral one', async () => {
    const p = await sc.create({ language: 'bash', persistent: true });
    const e = await sc.create({ language: 'bash' });
    await sc.ok('write_file', { sandbox_id: p.sandbox_id, path: 'a.txt', content: 'kept' });
    await sc.close();
    sc = await start();
    assert.equal((await listed(sc, p.sandbox_id)).status, 'stopped');
    assert.equal(await listed(sc, e.sandbox_id), undefined);
    const r = await sc.ok('execute_command', { sandbox_id: p.sandbox_id, command: 'cat a.txt' });
    assert.equal(r.stdout, 'kept');
    assert.equal(r.state_lost, true);
  });

  test('pause to disk and resume: files kept, memory state reported lost, calls refused while paused', async () => {
    const { sandbox_id } = await sc.create({ language: 'python', persistent: true });
    await sc.ok('execute_code', { sandbox_id, code: "v = 7\nopen('p.txt', 'w').write('paused files')" });
    const p = await sc.ok('pause_sandbox', { sandbox_id });
    assert.equal(p.mode, 'stop');
    assert.equal(p.memory_saved, false);
    assert.match(p.note, /memory state was lost/);
    assert.equal((await listed(sc, sandbox_id)).status, 'paused');
    const refused = await sc.err('execute_code', { sandbox_id, code: 'print(1)' });
    assert.match(refused.text, /is paused: call resume_sandbox first \[FAILED_PRECONDITION\]|is paused: call resume_sandbox first/);
    // A paused sandbox stays paused across a restart.
    await killHard(sc);
    sc = await start();
    assert.equal((await listed(sc, sandbox_id)).status, 'paused');
    const r = await sc.ok('resume_sandbox', { sandbox_id });
    assert.equal(r.state_lost, true);
    const run = await sc.ok('execute_code', { sandbox_id, code: "print(open('p.txt').read(), 'v' in globals())" });
    assert.equal(run.stdout, 'paused files False\n');
    assert.equal(run.state_lost, true);
  });

  test('pause with mode freeze keeps the interpreter\'s memory; an ephemeral sandbox cannot stop to disk', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    await sc.ok('execute_code', { sandbox_id, code: 'x = 41' });
    const stop = await sc.err('pause_sandbox', { sandbox_id, mode: 'stop' });
    assert.match(stop.text, /ephemeral sandbox's files live in memory.*persistent: true/);
    const p = await sc.ok('pause_sandbox', { sandbox_id });
    assert.equal(p.mode, 'freeze');
    assert.equal(p.memory_saved, true);
    assert.equal((await listed(sc, sandbox_id)).status, 'paused');
    await sc.err('execute_command', { sandbox_id, command: 'true' });
    const r = await sc.ok('resume_sandbox', { sandbox_id });
    assert.equal(r.state_lost, false);
    const run = await sc.ok('execute_code', { sandbox_id, code: 'print(x + 1)' });
    assert.equal(run.stdout, '42\n');
    assert.equal(run.state_lost, undefined);
  });

  test('fork copies the files; the copies are independent and the original keeps running', async () => {
    for (const persistent of [true, false]) {
      const src = await sc.create({ language: 'bash', persistent });
      await sc.ok('execute_command', { sandbox_id: src.sandbox_id, command: 'mkdir -p d && echo one > d/a.txt && head -c 3000000 /dev/urandom > big.bin && sha256sum big.bin > sum' });
      const f = await sc.ok('fork_sandbox', { sandbox_id: src.sandbox_id, name: `child-${persistent}` });
      assert.notEqual(f.sandbox_id, src.sandbox_id);
      assert.equal(f.forked_from, src.sandbox_id);
      assert.equal(f.persistent, persistent);
      const check = await sc.ok('execute_command', { sandbox_id: f.sandbox_id, command: 'cat d/a.txt && sha256sum -c sum' });
      assert.equal(check.stdout, 'one\nbig.bin: OK\n', JSON.stringify(check));
      await sc.ok('execute_command', { sandbox_id: f.sandbox_id, command: 'echo two > d/b.txt' });
      await sc.ok('execute_command', { sandbox_id: src.sandbox_id, command: 'echo src > d/c.txt' });
      const inSrc = await sc.ok('execute_command', { sandbox_id: src.sandbox_id, command: 'ls d' });
      const inFork = await sc.ok('execute_command', { sandbox_id: f.sandbox_id, command: 'ls d' });
      assert.equal(inSrc.stdout, 'a.txt\nc.txt\n');
      assert.equal(inFork.stdout, 'a.txt\nb.txt\n');
    }
  });

  test('closing a stopped persistent sandbox deletes its disk; unknown storage is swept at start', async () => {
    const { sandbox_id } = await sc.create({ language: 'bash', persistent: true });
    const disk = join(state.dir, 'sandboxes', sandbox_id);
    assert.ok(existsSync(disk), `${disk} holds its files`);
    await sc.close();
    sc = await start();
    assert.equal((await listed(sc, sandbox_id)).status, 'stopped');
    const c = await sc.ok('close_sandbox', { sandbox_id });
    assert.equal(c.closed, true);
    assert.equal(existsSync(disk), false);
    assert.equal(await listed(sc, sandbox_id), undefined);
  });

  test('idle past ttl_s with ttl_action pause: paused, not destroyed', async () => {
    const { sandbox_id } = await sc.create({ language: 'bash', persistent: true, ttl_s: 10, ttl_action: 'pause' });
    await sc.ok('write_file', { sandbox_id, path: 'keep.txt', content: 'still here' });
    let status;
    for (let i = 0; i < 80 && status !== 'paused'; i++) {
      await new Promise((r) => setTimeout(r, 250));
      status = (await listed(sc, sandbox_id))?.status;
    }
    assert.equal(status, 'paused');
    await sc.ok('resume_sandbox', { sandbox_id });
    const r = await sc.ok('execute_command', { sandbox_id, command: 'cat keep.txt' });
    assert.equal(r.stdout, 'still here');
  });

  test('unknown or busy: pause, resume and fork say what to do, and the server keeps answering', async () => {
    for (const tool of ['pause_sandbox', 'resume_sandbox', 'fork_sandbox']) {
      const r = await sc.err(tool, { sandbox_id: 'no-such-sandbox' });
      assert.match(r.text, /no sandbox 'no-such-sandbox'.*list_sandboxes/);
    }
    const { sandbox_id } = await sc.create({ language: 'bash' });
    const running = sc.call('execute_command', { sandbox_id, command: 'sleep 1; echo done' });
    // The call is in flight once the sandbox's process list shows the sleep.
    for (let i = 0; i < 100; i++) {
      const st = await sc.ok('get_sandbox_status', { sandbox_id });
      if (st.usage?.processes >= 3) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const busy = await sc.err('pause_sandbox', { sandbox_id, mode: 'freeze' });
    assert.match(busy.text, /is running a call; pause it when the call ends \[FAILED_PRECONDITION\]/i);
    assert.equal((await running).sc.stdout, 'done\n');
    await sc.ok('pause_sandbox', { sandbox_id });
    const fork = await sc.err('fork_sandbox', { sandbox_id });
    assert.match(fork.text, /is paused: resume_sandbox it, then fork it/);
    await sc.ok('resume_sandbox', { sandbox_id });
    assert.ok((await sc.ok('list_sandboxes')).count >= 1);
  });

  test('a second server on the same state dir refuses persistent sandboxes and says which server has them', async () => {
    const other = await start();
    try {
      const r = await other.err('create_sandbox', { language: 'bash', persistent: true });
      assert.match(r.text, new RegExp(`another sandcastle server \\(pid ${serverPid(sc)}\\) runs the persistent sandboxes`));
      await other.create({ language: 'bash' });  // ephemeral ones work
    } finally {
      await other.close();
    }
  });
});

describe('durable sandboxes over HTTP', () => {
  test('a keyless session cannot make a persistent sandbox; a key\'s survives a restart of the server', async () => {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { keys, startHttp, tempStateDir } = await import('./lib/http.mjs');
    const { rmSync } = await import('node:fs');
    const connect = async (url, headers = {}) => {
      const client = new Client({ name: 'sandcastle-e2e-durable', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
      return client;
    };
    const state = tempStateDir();
    try {
      let srv = await startHttp(['--pool-size', '0'], { stateDir: state });
      const anon = await connect(srv.url);
      const refused = await anon.callTool({ name: 'create_sandbox', arguments: { persistent: true } });
      assert.equal(refused.isError, true);
      assert.match(refused.content[0].text, /without an API key this session is its only owner.*API key/);
      await anon.close();
      await srv.stop();

      const key = JSON.parse(keys(state, '--json', 'create', '--name', 'durable')).key;
      const auth = { authorization: `Bearer ${key}` };
      srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
      let c = await connect(srv.url, auth);
      const made = await c.callTool({ name: 'create_sandbox', arguments: { persistent: true, language: 'bash', name: 'kept' } });
      assert.ok(!made.isError, JSON.stringify(made.content));
      await c.callTool({ name: 'write_file', arguments: { sandbox_id: 'kept', path: 'k.txt', content: 'over http' } });
      await c.close();
      await srv.stop('SIGKILL');
      srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
      c = await connect(srv.url, auth);
      const r = await c.callTool({ name: 'execute_command', arguments: { sandbox_id: 'kept', command: 'cat k.txt' } });
      assert.equal(r.structuredContent.stdout, 'over http');
      assert.equal(r.structuredContent.state_lost, true);
      await c.callTool({ name: 'close_sandbox', arguments: { sandbox_id: 'kept' } });
      await c.close();
      await srv.stop();

      // The per-key quota counts running sandboxes, also one started again.
      srv = await startHttp(['--auth', '--pool-size', '0', '--max-per-key', '1'], { stateDir: state });
      c = await connect(srv.url, auth);
      const q1 = await c.callTool({ name: 'create_sandbox', arguments: { persistent: true, language: 'bash', name: 'q1' } });
      assert.ok(!q1.isError, JSON.stringify(q1.content));
      const paused = await c.callTool({ name: 'pause_sandbox', arguments: { sandbox_id: 'q1' } });
      assert.equal(paused.structuredContent.mode, 'stop');
      const q2 = await c.callTool({ name: 'create_sandbox', arguments: { language: 'bash' } });
      assert.ok(!q2.isError, JSON.stringify(q2.content));
      const over = await c.callTool({ name: 'resume_sandbox', arguments: { sandbox_id: 'q1' } });
      assert.equal(over.isError, true);
      assert.match(over.content[0].text, /quota per user.*pause or close one.*\[resource_exhausted\]/);
      await c.callTool({ name: 'close_sandbox', arguments: { sandbox_id: q2.structuredContent.sandbox_id } });
      const back = await c.callTool({ name: 'resume_sandbox', arguments: { sandbox_id: 'q1' } });
      assert.ok(!back.isError, JSON.stringify(back.content));
      await c.close();
      await srv.stop();
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });
});
