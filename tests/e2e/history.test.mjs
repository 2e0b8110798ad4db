// get_sandbox_history with the official SDK client over Streamable HTTP:
// three runs are recorded and read back a page at a time, newest first;
// another session (another owner) gets "not found" for them; with
// --history-max-mb 0 nothing is recorded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttp } from './lib/http.mjs';

let srv;
const clients = [];

async function connect(url) {
  const client = new Client({ name: 'history-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  clients.push(client);
  return client;
}

async function call(client, name, args) {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args } }, CallToolResultSchema,
    { timeout: 60000 });
  const text = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { isError: r.isError === true, sc: r.structuredContent, text };
}

async function ok(client, name, args) {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name}: ${r.text.slice(0, 400)}`);
  return r;
}

before(async () => { srv = await startHttp([]); });
after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await srv?.stop();
});

test('three runs come back newest first, paged 2 + 1, with their fields', async () => {
  const alice = await connect(srv.url);
  const id = (await ok(alice, 'create_sandbox', { language: 'python' })).sc.sandbox_id;
  await ok(alice, 'execute_code', { sandbox_id: id, code: 'x = 41' });
  await ok(alice, 'execute_code', { sandbox_id: id, code: 'import sys\nprint(x + 1)\nprint("warn", file=sys.stderr)' });
  await ok(alice, 'execute_command', { sandbox_id: id, command: 'echo made > out.txt; exit 3' });

  const p1 = await ok(alice, 'get_sandbox_history', { sandbox_id: id, limit: 2 });
  assert.equal(p1.sc.sandbox_id, id);
  assert.equal(p1.sc.count, 2);
  assert.equal(p1.sc.entries.length, 2);
  const [cmd, code2] = p1.sc.entries;
  assert.equal(cmd.tool, 'execute_command');
  assert.equal(cmd.input, 'echo made > out.txt; exit 3');
  assert.equal(cmd.exit_code, 3);
  assert.equal(cmd.reason, 'exited');
  assert.deepEqual(cmd.files_created, ['out.txt']);
  assert.equal(code2.tool, 'execute_code');
  assert.equal(code2.language, 'python');
  assert.equal(code2.stdout, '42\n');
  assert.equal(code2.stderr, 'warn\n');
  assert.equal(code2.exit_code, 0);
  assert.equal(code2.truncated, false);
  assert.ok(cmd.seq > code2.seq, 'newest first');
  for (const e of p1.sc.entries) {
    assert.ok(e.duration_ms > 0, `duration ${e.duration_ms}`);
    assert.match(e.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(typeof e.caller, 'string');
    assert.equal(e.images, 0);
  }
  assert.equal(p1.sc.next_before, code2.seq);
  assert.match(p1.text, /2 run\(s\) of sb-[0-9a-f]+, newest first \(older ones: pass before=\d+\)/);

  const p2 = await ok(alice, 'get_sandbox_history', { sandbox_id: id, limit: 2, before: p1.sc.next_before });
  assert.equal(p2.sc.count, 1);
  assert.equal(p2.sc.entries[0].input, 'x = 41');
  assert.equal(p2.sc.entries[0].stdout, '');
  assert.ok(p2.sc.entries[0].seq < code2.seq);
  assert.equal(p2.sc.next_before, undefined, 'no page after the last');

  // Another session is another owner: the same answer as for no sandbox at all.
  const bob = await connect(srv.url);
  const theirs = await call(bob, 'get_sandbox_history', { sandbox_id: id });
  const none = await call(bob, 'get_sandbox_history', { sandbox_id: 'sb-000000000000' });
  assert.equal(theirs.isError, true);
  assert.match(theirs.text, /\[not_found\]|NOT_FOUND|not found|no sandbox/i);
  assert.equal(theirs.text.replace(id, 'ID'), none.text.replace('sb-000000000000', 'ID'));
});

test('--history-max-mb 0 records nothing', async () => {
  const s = await startHttp(['--history-max-mb', '0']);
  try {
    const c = new Client({ name: 'history-e2e', version: '1.0.0' }, { capabilities: {} });
    await c.connect(new StreamableHTTPClientTransport(new URL(s.url)));
    const id = (await ok(c, 'create_sandbox', { language: 'bash' })).sc.sandbox_id;
    await ok(c, 'execute_command', { sandbox_id: id, command: 'echo hi' });
    const h = await ok(c, 'get_sandbox_history', { sandbox_id: id });
    assert.equal(h.sc.count, 0);
    assert.deepEqual(h.sc.entries, []);
    await c.close();
  } finally {
    await s.stop();
  }
});
