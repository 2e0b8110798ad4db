// API keys, ownership, quotas and file links over HTTP. Two keys used at the
// same time never see or touch each other's sandboxes (seed d's shared-user
// race is the failure this guards against); a session without a key owns its
// sandboxes only until it ends; file links carry a signed token, never a key.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { BIN, sleep } from './lib/harness.mjs';
import { INIT, keys, post, startHttp, tempStateDir } from './lib/http.mjs';

async function clientWith(url, headers = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'sandcastle-e2e-auth', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

const structured = (r) => {
  assert.ok(!r.isError, `tool failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent ?? JSON.parse(r.content[0].text);
};

describe('API keys', () => {
  let state, srv, keyA, keyB;
  before(async () => {
    state = tempStateDir();
    keyA = JSON.parse(keys(state, '--json', 'create', '--name', 'alice')).key;
    keyB = JSON.parse(keys(state, '--json', 'create', '--name', 'bob')).key;
    srv = await startHttp(['--auth', '--max-per-key', '2', '--pool-size', '0'], { stateDir: state });
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('keys list shows names and ids, never the keys; the database holds no key', () => {
    const list = JSON.parse(keys(state, '--json', 'list'));
    assert.deepEqual(list.map((k) => k.name).sort(), ['alice', 'bob']);
    // sc_<hex id>_<secret>; the base64url secret may itself contain '_'.
    const secret = keyA.slice(keyA.indexOf('_', 3) + 1);
    assert.ok(secret.length >= 32, `secret part of ${keyA}`);
    assert.ok(!JSON.stringify(list).includes(secret));
    const db = spawnSync('grep', ['-rlF', secret, state], { encoding: 'utf8' });
    assert.equal(db.stdout, '', 'secret absent from the state directory');
  });

  test('no key → 401 with WWW-Authenticate; a wrong key → 401', async () => {
    const none = await post(srv.url, INIT());
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate'), /^Bearer realm="sandcastle"/);
    const wrong = await post(srv.url, INIT(), { authorization: `Bearer ${keyA}x` });
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate'), /invalid_token/);
    assert.equal((await fetch(`${srv.base}/healthz`)).status, 200, '/healthz stays open');
  });

  test('Authorization: Bearer, X-API-Key and ?api_key= are accepted', async () => {
    assert.equal((await post(srv.url, INIT(), { authorization: `Bearer ${keyA}` })).status, 200);
    assert.equal((await post(srv.url, INIT(), { 'x-api-key': keyB })).status, 200);
    assert.equal((await post(`${srv.url}?api_key=${encodeURIComponent(keyA)}`, INIT())).status, 200);
    // seed d's way: the key in the SSE URL; /messages works with the session id alone.
    const client = new Client({ name: 'sse-key', version: '1.0.0' });
    await client.connect(new SSEClientTransport(new URL(`${srv.sseUrl}?api_key=${encodeURIComponent(keyA)}`)));
    assert.ok((await client.listTools()).tools.length > 0);
    await client.close();
  });

  test('a session belongs to its key: another key gets 404 on it', async () => {
    const a = await post(srv.url, INIT(), { authorization: `Bearer ${keyA}` });
    const sid = a.headers.get('mcp-session-id');
    const r = await post(srv.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { authorization: `Bearer ${keyB}`, 'mcp-session-id': sid });
    assert.equal(r.status, 404);
  });

  test('two keys at once: neither sees nor touches the other\'s sandboxes; quota per key', async () => {
    const [A, B] = await Promise.all([clientWith(srv.url, { authorization: `Bearer ${keyA}` }),
      clientWith(srv.url, { 'x-api-key': keyB })]);
    try {
      const [sa, sb] = await Promise.all([
        A.client.callTool({ name: 'create_sandbox', arguments: { name: 'mine' } }),
        B.client.callTool({ name: 'create_sandbox', arguments: { name: 'mine' } })]);
      const idA = structured(sa).sandbox_id, idB = structured(sb).sandbox_id;
      assert.notEqual(idA, idB);
      // Interleaved, concurrent: each list shows exactly its own.
      const lists = await Promise.all(Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? B : A).client.callTool({ name: 'list_sandboxes', arguments: {} })));
      lists.forEach((l, i) => {
        const ids = structured(l).sandboxes.map((s) => s.sandbox_id);
        assert.deepEqual(ids, [i % 2 ? idB : idA], `list ${i}`);
      });
      // B acting on A's sandbox, by id and by name, is "not found".
      for (const args of [{ sandbox_id: idA, command: 'echo pwned > /workspace/x' }]) {
        const r = await B.client.callTool({ name: 'execute_command', arguments: args });
        assert.equal(r.isError, true);
        assert.match(r.content[0].text, /not found|NOT_FOUND|no sandbox/i);
      }
      const closeOther = await B.client.callTool({ name: 'close_sandbox', arguments: { sandbox_id: idA } });
      assert.equal(closeOther.isError, true);
      const still = await A.client.callTool({ name: 'execute_command', arguments: { sandbox_id: idA, command: 'ls /workspace' } });
      assert.ok(!still.isError, JSON.stringify(still.content));
      assert.ok(!JSON.stringify(still.structuredContent).includes('x'.repeat(0) + 'pwned'));
      // Quota: 2 per key.
      await A.client.callTool({ name: 'create_sandbox', arguments: {} });
      const third = await A.client.callTool({ name: 'create_sandbox', arguments: {} });
      assert.equal(third.isError, true, 'third sandbox refused');
      assert.match(third.content[0].text, /quota|limit|per owner|RESOURCE_EXHAUSTED/i);
      // B's quota is its own.
      const b2 = await B.client.callTool({ name: 'create_sandbox', arguments: {} });
      assert.ok(!b2.isError);
      // A key's sandboxes outlive its session.
      await A.transport.terminateSession();
      await A.client.close();
      const A2 = await clientWith(srv.url, { authorization: `Bearer ${keyA}` });
      const again = structured(await A2.client.callTool({ name: 'list_sandboxes', arguments: {} }));
      assert.equal(again.count, 2);
      await A2.client.close();
    } finally {
      await A.client.close().catch(() => {});
      await B.client.close();
    }
  });

  test('a revoked key stops working at once', async () => {
    const k = JSON.parse(keys(state, '--json', 'create', '--name', 'temp'));
    assert.equal((await post(srv.url, INIT(), { authorization: `Bearer ${k.key}` })).status, 200);
    keys(state, 'revoke', k.id);
    assert.equal((await post(srv.url, INIT(), { authorization: `Bearer ${k.key}` })).status, 401);
  });
});

describe('without keys (loopback)', () => {
  let srv;
  before(async () => { srv = await startHttp(['--pool-size', '0']); });
  after(async () => { await srv?.stop(); });

  test('each session owns its sandboxes; they are closed when the session ends', async () => {
    const A = await clientWith(srv.url), B = await clientWith(srv.url);
    const id = structured(await A.client.callTool({ name: 'create_sandbox', arguments: {} })).sandbox_id;
    assert.equal(structured(await B.client.callTool({ name: 'list_sandboxes', arguments: {} })).count, 0);
    const live = async () => Number((await (await fetch(`${srv.base}/metrics`)).text()).match(/^sandcastle_sandboxes_live (\d+)/m)[1]);
    assert.equal(await live(), 1);
    await A.transport.terminateSession();
    for (let i = 0; i < 40 && (await live()) > 0; i++) await sleep(50);
    assert.equal(await live(), 0, `sandbox ${id} closed with its session`);
    await A.client.close().catch(() => {});
    await B.client.close();
  });

  test('file links: signed, typed, ranged; a tampered or foreign link is refused', async () => {
    const { client } = await clientWith(srv.url);
    const id = structured(await client.callTool({ name: 'create_sandbox', arguments: {} })).sandbox_id;
    const r = structured(await client.callTool({ name: 'execute_command', arguments: {
      sandbox_id: id, command: 'printf "hello, file links" > out.txt && printf "\\x89PNG\\r\\n" > pic.png' } }));
    const files = Object.fromEntries(r.files_created.map((f) => [f.path, f.url]));
    assert.ok(files['out.txt'] && files['pic.png'], JSON.stringify(r.files_created));
    const url = files['out.txt'];
    assert.ok(url.startsWith(`${srv.base}/files/${id}/out.txt?`), url);
    assert.ok(!/api_key|Bearer|sc_/.test(url));
    const got = await fetch(url);
    assert.equal(got.status, 200);
    assert.match(got.headers.get('content-type'), /^text\/plain/);
    assert.equal(got.headers.get('content-length'), '17');
    assert.equal(await got.text(), 'hello, file links');
    const part = await fetch(url, { headers: { range: 'bytes=7-10' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), 'bytes 7-10/17');
    assert.equal(await part.text(), 'file');
    assert.equal((await fetch(url, { headers: { range: 'bytes=99-' } })).status, 416);
    assert.equal((await fetch(files['pic.png'])).headers.get('content-type'), 'image/png');
    const tampered = url.replace('out.txt', 'pic.png');
    assert.equal((await fetch(tampered)).status, 403);
    const expired = url.replace(/exp=\d+/, 'exp=1000');
    assert.equal((await fetch(expired)).status, 403);
    await client.close();
  });
});

describe('refusals at start', () => {
  test('a non-loopback address without auth is refused unless --insecure', () => {
    const state = tempStateDir();
    try {
      const r = spawnSync(BIN, ['--transport', 'http', '--host', '0.0.0.0', '--port', '0', '--state-dir', state],
        { encoding: 'utf8', timeout: 10000 });
      assert.equal(r.status, 2);
      assert.match(r.stderr, /refusing to listen on 0\.0\.0\.0 without API keys/);
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });
});
