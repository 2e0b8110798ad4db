// --profile seed-d: python-mcp-sandbox's face (../shared/seeds/004), over its
// transport: HTTP+SSE at /sse + /messages with API keys (?api_key=,
// X-API-Key, Bearer), through the official SDK v1 client. tools/list is
// exactly its seven tools; its README's example workflow is replayed on its
// JSON results; two keys never see each other's sandboxes (the seed kept the
// current user on one shared object).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { E2E_DIR } from './lib/harness.mjs';
import { keys, startHttp, tempStateDir } from './lib/http.mjs';
import { tempDir } from './lib/sandbox_client.mjs';

const SEED_D_TOOLS = [
  'create_sandbox', 'list_sandboxes', 'execute_python_code', 'install_package_in_sandbox',
  'check_package_installation_status', 'execute_terminal_command', 'upload_file_to_sandbox',
];

function startIndex() {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

async function sseClient(url, headers = {}) {
  const client = new Client({ name: 'seed-d-e2e', version: '1.0.0' });
  await client.connect(new SSEClientTransport(new URL(url), { requestInit: { headers } }));
  const { tools } = await client.listTools();
  const call = async (name, args = {}) => {
    const r = await client.request({ method: 'tools/call', params: { name, arguments: args } },
      CallToolResultSchema, { timeout: 60000 });
    const text = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    return { isError: r.isError === true, sc: r.structuredContent, text, raw: r };
  };
  const ok = async (name, args) => {
    const r = await call(name, args);
    assert.equal(r.isError, false, `${name}: ${r.text}`);
    return r.sc;
  };
  return { client, tools, call, ok, sdkCall: (name, args) => client.callTool({ name, arguments: args }) };
}

describe('profile seed-d (python-mcp-sandbox) over HTTP+SSE with API keys', () => {
  let state, srv, index, host, keyA, keyB, alice, bob, id;
  before(async () => {
    state = tempStateDir();
    host = tempDir('sandcastle-e2e-seed-d-');
    keyA = JSON.parse(keys(state, '--json', 'create', '--name', 'alice')).key;
    keyB = JSON.parse(keys(state, '--json', 'create', '--name', 'bob')).key;
    index = await startIndex();
    srv = await startHttp(['--profile', 'seed-d', '--auth', '--allow-host-path', host.dir,
      '--pip-index-url', `http://127.0.0.1:${index.port}/simple/`], { stateDir: state });
    // The README's configuration: the key in the SSE URL.
    alice = await sseClient(`${srv.sseUrl}?api_key=${encodeURIComponent(keyA)}`);
    bob = await sseClient(srv.sseUrl, { 'x-api-key': keyB });
  });
  after(async () => {
    await alice?.client.close();
    await bob?.client.close();
    await srv?.stop();
    index?.child.kill();
    host?.cleanup();
    rmSync(state, { recursive: true, force: true });
  });

  test('tools/list is exactly the seed\'s seven tools, with its argument names', async () => {
    assert.deepEqual(alice.tools.map((t) => t.name).sort(), [...SEED_D_TOOLS].sort());
    const props = (n) => Object.keys(alice.tools.find((t) => t.name === n).inputSchema.properties).sort();
    assert.deepEqual(props('create_sandbox'), ['name']);
    assert.deepEqual(props('list_sandboxes'), []);
    assert.deepEqual(props('execute_python_code'), ['code', 'sandbox_id']);
    assert.deepEqual(props('install_package_in_sandbox'), ['package_name', 'sandbox_id']);
    assert.deepEqual(props('check_package_installation_status'), ['package_name', 'sandbox_id']);
    assert.deepEqual(props('execute_terminal_command'), ['command', 'sandbox_id']);
    assert.deepEqual(props('upload_file_to_sandbox'), ['dest_path', 'local_file_path', 'sandbox_id']);
    const up = alice.tools.find((t) => t.name === 'upload_file_to_sandbox').inputSchema;
    assert.equal(up.properties.dest_path.default, '/app/results');
    // Bearer works too, and keyless is refused.
    const carol = await sseClient(srv.sseUrl, { authorization: `Bearer ${keyA}` });
    await carol.client.close();
    await assert.rejects(sseClient(srv.sseUrl));
  });

  test('1. list_sandboxes (none yet), then create_sandbox → {sandbox_id, user_id, name, status}', async () => {
    assert.deepEqual(await alice.ok('list_sandboxes'), { result: [] });
    const s = await alice.ok('create_sandbox', { name: 'analysis' });
    assert.deepEqual(Object.keys(s).sort(), ['name', 'sandbox_id', 'status', 'user_id']);
    assert.equal(s.name, 'analysis');
    assert.equal(s.status, 'running');
    assert.match(s.user_id, /\S/);
    id = s.sandbox_id;
    const listed = await alice.ok('list_sandboxes');
    assert.deepEqual(listed.result.map((x) => [x.sandbox_id, x.name, x.status]), [[id, 'analysis', 'running']]);
    for (const k of ['image', 'created', 'last_used', 'installed_packages']) assert.ok(k in listed.result[0], k);
    // The text is the JSON list itself, as FastMCP sends a list.
    const r = await alice.call('list_sandboxes');
    assert.deepEqual(JSON.parse(r.text), listed.result);
  });

  test('another key sees none of them and cannot use the id (the seed\'s shared-user flaw)', async () => {
    assert.deepEqual(await bob.ok('list_sandboxes'), { result: [] });
    const [a, b] = await Promise.all([
      alice.call('execute_terminal_command', { sandbox_id: id, command: 'echo mine' }),
      bob.call('execute_terminal_command', { sandbox_id: id, command: 'echo stolen' }),
    ]);
    assert.deepEqual(a.sc, { stdout: 'mine\n', stderr: '', exit_code: 0 });
    assert.equal(b.isError, true);
    assert.equal(b.sc.exit_code, -1);
    assert.equal(b.sc.stdout, '');
    assert.match(b.sc.stderr, /^no sandbox .*create_sandbox.*\[not_found\]$/);
  });

  test('2-3. install_package_in_sandbox, then check_package_installation_status', async () => {
    const none = await alice.ok('check_package_installation_status', { sandbox_id: id, package_name: 'sandcastle_demo' });
    assert.equal(none.status, 'not_found');
    assert.equal(none.success, false);
    const r = await alice.ok('install_package_in_sandbox', { sandbox_id: id, package_name: 'sandcastle_demo' });
    assert.ok(['success', 'installing'].includes(r.status), JSON.stringify(r));
    let st = r;
    for (let i = 0; st.status === 'installing' && i < 20; i++)
      st = await alice.ok('check_package_installation_status', { sandbox_id: id, package_name: 'sandcastle_demo' });
    assert.deepEqual({ status: st.status, complete: st.complete, success: st.success, message: st.message },
      { status: 'success', complete: true, success: true, message: 'Successfully installed sandcastle_demo' });
    const bad = await alice.ok('install_package_in_sandbox', { sandbox_id: id, package_name: 'no-such-package-x' });
    let b = bad;
    for (let i = 0; b.status === 'installing' && i < 20; i++)
      b = await alice.ok('check_package_installation_status', { sandbox_id: id, package_name: 'no-such-package-x' });
    assert.equal(b.status, 'failed', JSON.stringify(b));
    assert.equal(b.success, false);
    assert.match(b.message, /^Failed to install no-such-package-x: /);
  });

  test('4. execute_python_code → {stdout, stderr, exit_code, files, file_links}; links serve the file', async () => {
    const code = 'import sandcastle_demo as d\nprint(d.greet("seed d"))\nwith open("out.csv", "w") as f:\n    f.write("a,b\\n1,2\\n")\nx = 41';
    const r = await alice.ok('execute_python_code', { sandbox_id: id, code });
    assert.deepEqual(Object.keys(r).sort(), ['exit_code', 'file_links', 'files', 'stderr', 'stdout']);
    assert.equal(r.stdout, 'hello seed d from the local index\n');
    assert.equal(r.exit_code, 0);
    assert.deepEqual(r.files, ['out.csv']);
    assert.match(r.file_links[0], /^http:\/\/127\.0\.0\.1:\d+\//);
    assert.ok(!r.file_links[0].includes(keyA.slice(-20)), 'no API key in the link (the seed embedded it)');
    const got = await fetch(r.file_links[0]);
    assert.equal(got.status, 200);
    assert.equal(await got.text(), 'a,b\n1,2\n');
    // State persists between calls (the seed ran each call afresh).
    assert.equal((await alice.ok('execute_python_code', { sandbox_id: id, code: 'print(x + 1)' })).stdout, '42\n');
    // The SDK's own callTool accepts the result against the outputSchema.
    const sdk = await alice.sdkCall('execute_python_code', { sandbox_id: id, code: 'print(1)' });
    assert.equal(sdk.structuredContent.stdout, '1\n');
  });

  test('an exception: exit_code 1 and the traceback in stderr', async () => {
    const r = await alice.ok('execute_python_code', { sandbox_id: id, code: '1/0' });
    assert.equal(r.exit_code, 1);
    assert.match(r.stderr, /ZeroDivisionError: division by zero/);
  });

  test('execute_terminal_command → {stdout, stderr, exit_code} kept apart', async () => {
    assert.deepEqual(await alice.ok('execute_terminal_command', { sandbox_id: id, command: 'echo out; echo err >&2; exit 3' }),
      { stdout: 'out\n', stderr: 'err\n', exit_code: 3 });
  });

  test('upload_file_to_sandbox: an allowed host file to /app/results (= /workspace); others refused', async () => {
    writeFileSync(join(host.dir, 'sales.csv'), 'q,n\n1,5\n');
    const r = await alice.ok('upload_file_to_sandbox', { sandbox_id: id, local_file_path: join(host.dir, 'sales.csv') });
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/sales.csv');
    const run = await alice.ok('execute_python_code', { sandbox_id: id, code: 'print(open("sales.csv").read(), end="")' });
    assert.equal(run.stdout, 'q,n\n1,5\n');
    const denied = await alice.call('upload_file_to_sandbox', { sandbox_id: id, local_file_path: '/etc/passwd' });
    assert.equal(denied.isError, true);
    assert.equal(denied.sc.error, true);
    assert.match(denied.sc.message, /PERMISSION_DENIED|allow/i);
  });
});

describe('profile seed-d over stdio', () => {
  let sc;
  before(async () => {
    const { connectSandcastle } = await import('./lib/sandbox_client.mjs');
    sc = await connectSandcastle({ args: ['--profile', 'seed-d'] });
  });
  after(async () => { await sc?.close(); });

  test('file_links are sandbox:// URIs that resources/read serves', async () => {
    assert.deepEqual(sc.tools.map((t) => t.name).sort(), [...SEED_D_TOOLS].sort());
    const { sandbox_id, user_id } = await sc.ok('create_sandbox', {});
    assert.equal(user_id, 'local');
    const r = await sc.ok('execute_python_code', { sandbox_id, code: 'open("plot.txt", "w").write("points")' });
    assert.deepEqual(r.files, ['plot.txt']);
    assert.match(r.file_links[0], /^sandbox:\/\//);
    const read = await sc.client.readResource({ uri: r.file_links[0] });
    assert.equal(read.contents[0].text, 'points');
  });
});
