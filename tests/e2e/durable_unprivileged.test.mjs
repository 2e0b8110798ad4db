// Durable sandboxes on a server without root (issue 16, persist_mirror.h):
// a persistent sandbox's /workspace is copied to the state dir after every
// call that can write, so what a call wrote before a kill -9 of the server is
// there after a restart (same id and name, the first run says state_lost),
// and a clean exit afterwards leaves no runtime directory, process or mount.
// The server runs as the test user (scripts/as-test-user's), or as the
// current user when that is not root.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BIN, REPO_ROOT } from './lib/harness.mjs';
import { descendants, runMounts, survivors } from './lib/leftovers.mjs';

const IS_ROOT = process.getuid() === 0;
const TEST_USER = 'sandcastle-test';
const CALL_MS = 90000;

function testUser() {
  if (!IS_ROOT) return null;
  execFileSync(resolve(REPO_ROOT, 'scripts/as-test-user'), ['true']);
  const id = (flag) => Number(execFileSync('id', [flag, TEST_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g'), home: `/home/${TEST_USER}` };
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}

// A stdio server, driven line by line, as `user` (null: as we are).
async function start(stateDir, user) {
  const env = { PATH: process.env.PATH, HOME: user ? user.home : process.env.HOME };
  const proc = spawn(BIN, ['--state-dir', stateDir, '--log-level', 'info'], {
    stdio: ['pipe', 'pipe', 'pipe'], env, ...(user ? { uid: user.uid, gid: user.gid } : {}),
  });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr += c.toString('utf8'); });
  proc.stdin.on('error', () => {});
  const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
  let buf = '';
  const waiting = new Map();
  proc.stdout.on('data', (c) => {
    buf += c.toString('utf8');
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg;
      try { msg = JSON.parse(line); } catch { continue; }
      if (msg && 'id' in msg && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
    }
  });
  let next = 1;
  const rpc = (method, params) => {
    const id = next++;
    const reply = new Promise((res) => waiting.set(id, res));
    proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    return withTimeout(reply, CALL_MS, method);
  };
  const init = await rpc('initialize', {
    protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'durable-unprivileged', version: '1' },
  });
  assert.ok(init.result, JSON.stringify(init));
  proc.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  const call = async (name, args) => {
    const r = await rpc('tools/call', { name, arguments: args });
    assert.ok(r?.result && !r.result.isError, `${name}: ${JSON.stringify(r).slice(0, 800)}\n${stderr.slice(-2000)}`);
    return r.result.structuredContent;
  };
  return { proc, exited, call, stderr: () => stderr };
}

describe('durable sandboxes without root', () => {
  test('what completed calls wrote survives kill -9; a clean exit leaves nothing behind', async () => {
    const user = testUser();
    const stateDir = mkdtempSync(join(tmpdir(), 'sandcastle-durable-u-'));
    if (user) chownSync(stateDir, user.uid, user.gid);
    try {
      let srv = await start(stateDir, user);
      const s = await srv.call('create_sandbox', { language: 'python', name: 'keep', persistent: true });
      assert.equal(s.persistent, true);
      const id = s.sandbox_id;
      await srv.call('write_file', { sandbox_id: id, path: 'notes.txt', content: 'written before the crash\n' });
      const cmd = await srv.call('execute_command', { sandbox_id: id, command: 'echo from-a-command > cmd.txt && ln -s /etc/shadow link' });
      assert.equal(cmd.exit_code, 0);
      const cell = await srv.call('execute_code', { sandbox_id: id, code: "open('cell.txt', 'w').write('from-a-cell')\nx = 41\nprint(x)" });
      assert.equal(cell.stdout, '41\n');
      // On disk already, in the state dir; the planted link is a link.
      const copy = join(stateDir, 'sandboxes', id, 'mirror', 'workspace');
      assert.equal(readFileSync(join(copy, 'cell.txt'), 'utf8'), 'from-a-cell');
      assert.ok(lstatSync(join(copy, 'link')).isSymbolicLink());
      assert.equal(readlinkSync(join(copy, 'link')), '/etc/shadow');

      const gone = new Promise((r) => srv.proc.once('exit', r));
      srv.proc.kill('SIGKILL');
      await gone;

      srv = await start(stateDir, user);
      const pid = srv.proc.pid;
      const listed = (await srv.call('list_sandboxes', {})).sandboxes.find((x) => x.sandbox_id === id);
      assert.ok(listed, 'listed after the restart');
      assert.equal(listed.name, 'keep');
      const run = await srv.call('execute_command', { sandbox_id: id, command: 'cat notes.txt cmd.txt cell.txt; echo; readlink link' });
      assert.equal(run.stdout, 'written before the crash\nfrom-a-command\nfrom-a-cell\n/etc/shadow\n', JSON.stringify(run));
      assert.equal(run.state_lost, true);
      const again = await srv.call('execute_command', { sandbox_id: id, command: 'true' });
      assert.equal(again.state_lost, undefined, 'state_lost is said once');

      // A clean exit: the files stay, nothing of the server's does.
      const procs = descendants(pid);
      const runDir = `/tmp/sandcastle-${pid}`;
      srv.proc.stdin.end();
      const { code, signal } = await withTimeout(srv.exited, 30000, 'exit');
      assert.equal(signal, null);
      assert.equal(code, 0, srv.stderr().slice(-2000));
      assert.deepEqual({
        runtimeDir: existsSync(runDir) ? [runDir] : [],
        processes: survivors(procs),
        mounts: runMounts(runDir),
      }, { runtimeDir: [], processes: [], mounts: [] }, 'left behind');
      assert.equal(readFileSync(join(copy, 'notes.txt'), 'utf8'), 'written before the crash\n');

      // close_sandbox removes its files.
      srv = await start(stateDir, user);
      await srv.call('close_sandbox', { sandbox_id: id });
      assert.equal(existsSync(join(stateDir, 'sandboxes', id)), false);
      srv.proc.stdin.end();
      assert.equal((await withTimeout(srv.exited, 30000, 'exit')).code, 0);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
