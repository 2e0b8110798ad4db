// --profile seed-a: mcp-code-sandbox's face (../shared/seeds/000, notes in
// ../shared/notes/peers.md section a). tools/list is exactly its ten tools;
// its README's workflow (create a sandbox under a session_id, run code that
// keeps state, install, the file tools, status, close, create_run_close) is
// replayed through the official SDK v1 client over stdio, asserting the
// seed's result shapes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startHttp } from './lib/http.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const SEED_A_TOOLS = [
  'close_sandbox', 'create_run_close', 'create_sandbox', 'execute_code', 'get_sandbox_status',
  'install_package', 'list_files', 'read_file', 'upload_file', 'write_file',
];

function json(r) {
  return JSON.parse(r.text);
}

describe('--profile seed-a (mcp-code-sandbox)', () => {
  let sc;
  const sid = 'my-session-1';
  before(async () => { sc = await connectSandcastle({ args: ['--profile', 'seed-a'] }); });
  after(async () => { await sc?.close(); });

  test('tools/list is exactly the seed\'s tools, with its argument names', () => {
    assert.deepEqual(sc.tools.map((t) => t.name).sort(), SEED_A_TOOLS);
    const args = (n) => Object.keys(sc.tool(n).inputSchema.properties).sort();
    assert.deepEqual(args('create_sandbox'), ['session_id']);
    assert.deepEqual(args('execute_code'), ['code', 'session_id']);
    assert.deepEqual(args('install_package'), ['package_name', 'session_id']);
    assert.deepEqual(args('create_run_close'), ['code']);
    assert.deepEqual(args('list_files'), ['path', 'session_id']);
    assert.equal(sc.tool('list_files').inputSchema.properties.path.default, '/');
    assert.deepEqual(args('read_file'), ['file_path', 'session_id']);
    assert.deepEqual(args('write_file'), ['content', 'file_path', 'session_id']);
    assert.deepEqual(args('upload_file'), ['destination_path', 'file_content', 'file_name', 'session_id']);
    assert.deepEqual(sc.tool('get_sandbox_status').inputSchema.required ?? [], []);
    for (const t of sc.tools) {
      assert.ok(t.description.length > 30, `${t.name} has a description`);
      assert.ok(t.annotations, `${t.name} has annotations`);
    }
    assert.equal(sc.tool('close_sandbox').annotations.destructiveHint, true);
    assert.equal(sc.tool('read_file').annotations.readOnlyHint, true);
  });

  test('create_sandbox answers in the seed\'s sentences; a second create says it exists', async () => {
    const r = await sc.sdkCall('create_sandbox', { session_id: sid });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.text, `Sandbox created successfully with session ID: ${sid}`);
    const again = await sc.sdkCall('create_sandbox', { session_id: sid });
    assert.equal(again.isError, false);
    assert.equal(again.text, `Sandbox with session ID ${sid} already exists.`);
  });

  test('execute_code returns {logs: {stdout: [lines], stderr}, error: null} and keeps state', async () => {
    const a = await sc.sdkCall('execute_code', { session_id: sid, code: 'x = 41\nprint("hello")\nprint("world")' });
    assert.equal(a.isError, false, a.text);
    assert.deepEqual(a.sc, { logs: { stdout: ['hello\n', 'world\n'], stderr: [] }, error: null });
    assert.deepEqual(json(a), a.sc, 'the text mirrors the structured result');
    const b = await sc.sdkCall('execute_code', { session_id: sid, code: 'print(x + 1)' });
    assert.deepEqual(b.sc.logs.stdout, ['42\n'], 'variables persist between calls');
  });

  test('an exception is error {name, value, traceback}, not a failed call', async () => {
    const r = await sc.sdkCall('execute_code', { session_id: sid, code: '1/0' });
    assert.equal(r.isError, false);
    assert.equal(r.sc.error.name, 'ZeroDivisionError');
    assert.match(r.sc.error.value, /division by zero/);
    assert.equal(typeof r.sc.error.traceback, 'string');
  });

  test('a displayed image comes back as image content after the JSON (the seed sent none)', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const r = await sc.sdkCall('execute_code', {
      session_id: sid,
      code: `import base64\nclass P:\n    def _repr_png_(self): return base64.b64decode('${png.toString('base64')}')\ndisplay(P())\nprint('shown')`,
    });
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(r.sc, { logs: { stdout: ['shown\n'], stderr: [] }, error: null });
    assert.equal(r.raw.content[0].type, 'text');
    assert.deepEqual(r.raw.content.slice(1), [{ type: 'image', data: png.toString('base64'), mimeType: 'image/png' }]);
  });

  test('write_file, read_file, list_files, upload_file keep the seed\'s shapes', async () => {
    const w = await sc.sdkCall('write_file', { session_id: sid, file_path: 'notes/a.txt', content: 'alpha\n' });
    assert.deepEqual(w.sc, { path: 'notes/a.txt', message: 'File written successfully' });
    const r = await sc.sdkCall('read_file', { session_id: sid, file_path: '/workspace/notes/a.txt' });
    assert.deepEqual(r.sc, { path: '/workspace/notes/a.txt', content: 'alpha\n' });
    const up = await sc.sdkCall('upload_file', { session_id: sid, file_name: 'data.csv', file_content: 'a,b\n1,2\n' });
    assert.deepEqual(up.sc, { path: '/workspace/data.csv', message: 'File uploaded successfully' });
    const code = await sc.sdkCall('execute_code', { session_id: sid, code: 'print(open("data.csv").read().splitlines()[1])' });
    assert.deepEqual(code.sc.logs.stdout, ['1,2\n'], 'an upload is where the code runs');
    const ls = await sc.sdkCall('list_files', { session_id: sid, path: '/workspace' });
    assert.equal(ls.sc.path, '/workspace');
    const byName = Object.fromEntries(ls.sc.files.map((f) => [f.name, f]));
    assert.equal(byName['data.csv'].type, 'file');
    assert.equal(byName['data.csv'].path, '/workspace/data.csv');
    assert.equal(byName['data.csv'].size, 8);
    assert.equal(byName.notes.type, 'dir');
    const root = await sc.sdkCall('list_files', { session_id: sid });
    assert.equal(root.sc.path, '/');
    assert.ok(root.sc.files.some((f) => f.name === 'workspace' && f.type === 'dir'), JSON.stringify(root.sc.files));
  });

  test('file errors say what to do; paths stay inside the sandbox', async () => {
    const missing = await sc.call('read_file', { session_id: sid, file_path: 'nope.txt' });
    assert.equal(missing.isError, true);
    assert.match(json(missing).error, /^Error reading file: nope\.txt: no such file or directory; call list_files/);
    const escape = await sc.call('upload_file', { session_id: sid, file_name: '../../etc/x', file_content: 'x' });
    assert.equal(escape.isError, true);
    assert.match(json(escape).error, /file_name '\.\.\/\.\.\/etc\/x' leaves its directory/);
    const rootWrite = await sc.call('write_file', { session_id: sid, file_path: '/etc/evil', content: 'x' });
    assert.equal(rootWrite.isError, true);
    assert.match(json(rootWrite).error, /^Error writing file: \/etc\/evil: /);
  });

  test('an unknown session_id is the seed\'s error, saying to create it first', async () => {
    for (const [tool, args] of [
      ['execute_code', { code: 'print(1)' }],
      ['read_file', { file_path: 'a' }],
      ['install_package', { package_name: 'numpy' }],
      ['get_sandbox_status', {}],
    ]) {
      const r = await sc.call(tool, { session_id: 'no-such-session', ...args });
      assert.equal(r.isError, true, tool);
      assert.equal(json(r).error,
        'No sandbox found with session ID: no-such-session. Create a sandbox first with create_sandbox (you choose the session_id).', tool);
    }
  });

  test('install_package: a package the index lacks is an error naming its cause', async () => {
    const r = await sc.call('install_package', { session_id: sid, package_name: 'sandcastle-no-such-package-e2e' }, { timeout: 120000 });
    assert.equal(r.isError, true, r.text);
    assert.equal(r.sc.package, 'sandcastle-no-such-package-e2e');
    assert.deepEqual(r.sc.output, { stdout: [], stderr: [] });
    assert.equal(typeof r.sc.error.name, 'string');
    assert.match(r.sc.error.value, /\S/);
    const bad = await sc.call('install_package', { session_id: sid, package_name: '--index-url=http://evil/ x' });
    assert.equal(bad.isError, true);
    assert.match(json(bad).error, /not a valid pip package name/);
  });

  test('get_sandbox_status: one session, or the count and ids of all', async () => {
    const one = await sc.sdkCall('get_sandbox_status', { session_id: sid });
    assert.deepEqual(one.sc, { status: 'active', session_id: sid, interpreter_type: 'sandcastle' });
    await sc.sdkCall('create_sandbox', { session_id: 'second' });
    const all = await sc.sdkCall('get_sandbox_status', {});
    assert.equal(all.sc.active_sandbox_count, 2);
    assert.deepEqual(all.sc.active_sessions.sort(), ['my-session-1', 'second']);
    assert.equal(all.sc.interpreter_type, 'sandcastle');
  });

  test('close_sandbox frees it; closing again says it is not active (not an error)', async () => {
    const c = await sc.sdkCall('close_sandbox', { session_id: sid });
    assert.equal(c.text, `Sandbox with session ID ${sid} has been successfully closed and all resources freed.`);
    const again = await sc.sdkCall('close_sandbox', { session_id: sid });
    assert.equal(again.isError, false);
    assert.equal(again.text, `Sandbox with session ID ${sid} is not active or has already been closed.`);
    const gone = await sc.call('execute_code', { session_id: sid, code: 'print(1)' });
    assert.equal(gone.isError, true);
    await sc.sdkCall('close_sandbox', { session_id: 'second' });
    const all = await sc.sdkCall('get_sandbox_status', {});
    assert.equal(all.sc.active_sandbox_count, 0);
  });

  test('create_run_close runs once and leaves nothing behind', async () => {
    const r = await sc.sdkCall('create_run_close', { code: 'print(sum(range(10)))' });
    assert.equal(r.isError, false, r.text);
    assert.deepEqual(r.sc, {
      logs: { stdout: ['45\n'], stderr: [] },
      error: null,
      sandbox_status: 'created and will be closed automatically',
      sandbox_closed: true,
      sandbox_removed: true,
    });
    const all = await sc.sdkCall('get_sandbox_status', {});
    assert.equal(all.sc.active_sandbox_count, 0);
  });

  test('a session_id longer than a sandbox name is refused with the limit', async () => {
    const r = await sc.call('create_sandbox', { session_id: 'x'.repeat(65) });
    assert.equal(r.isError, true);
    assert.match(r.text, /session_id/);
  });
});

// The seed kept one dictionary of session ids for every client; here a
// session_id names a sandbox of its caller's only (an API key's, or over
// HTTP without keys its MCP session's).
describe('--profile seed-a over HTTP: session ids are per caller', () => {
  let srv;
  const clients = [];
  before(async () => { srv = await startHttp(['--profile', 'seed-a']); });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await srv?.stop();
  });

  async function connect(name) {
    const c = new Client({ name, version: '1.0.0' }, { capabilities: {} });
    await c.connect(new StreamableHTTPClientTransport(new URL(srv.url)));
    clients.push(c);
    return c;
  }
  const text = (r) => r.content.map((c) => c.text).join('');

  test('the same session_id in two sessions is two sandboxes; neither sees the other\'s', async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const a = await alice.callTool({ name: 'create_sandbox', arguments: { session_id: 'shared' } });
    assert.equal(text(a), 'Sandbox created successfully with session ID: shared');
    await alice.callTool({ name: 'execute_code', arguments: { session_id: 'shared', code: 'secret = "alice-only"' } });
    const peek = await bob.callTool({ name: 'execute_code', arguments: { session_id: 'shared', code: 'print(secret)' } });
    assert.equal(peek.isError, true);
    assert.match(text(peek), /No sandbox found with session ID: shared/);
    const b = await bob.callTool({ name: 'create_sandbox', arguments: { session_id: 'shared' } });
    assert.equal(text(b), 'Sandbox created successfully with session ID: shared', 'not "already exists"');
    const mine = await bob.callTool({ name: 'execute_code', arguments: { session_id: 'shared', code: 'print(globals().get("secret"))' } });
    assert.deepEqual(mine.structuredContent.logs.stdout, ['None\n']);
    const status = await bob.callTool({ name: 'get_sandbox_status', arguments: {} });
    assert.equal(status.structuredContent.active_sandbox_count, 1);
    const closed = await bob.callTool({ name: 'close_sandbox', arguments: { session_id: 'shared' } });
    assert.match(text(closed), /successfully closed/);
    const still = await alice.callTool({ name: 'execute_code', arguments: { session_id: 'shared', code: 'print(secret)' } });
    assert.deepEqual(still.structuredContent.logs.stdout, ['alice-only\n'], "bob's close left alice's sandbox alone");
  });
});
