// The REST API under /api/v1 (docs/rest-api.md) against the real server
// binary: authentication by key header or browser session (cookie flags,
// CSRF, logout, revocation), admin-only keys, problem+json errors (401, 403,
// 404, 405, 413, 415, 400), and the OpenAPI document.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import WebSocket from 'ws';
import { keys, readSse, startHttp, tempStateDir } from './lib/http.mjs';

const PROBLEM = 'application/problem+json';

async function call(base, method, path, { key, cookie, csrf, body, headers = {}, raw } = {}) {
  const h = { ...headers };
  if (key) h.authorization = `Bearer ${key}`;
  if (cookie) h.cookie = cookie;
  if (csrf) h['x-csrf-token'] = csrf;
  let payload;
  if (raw !== undefined) payload = raw;
  else if (body !== undefined) { payload = JSON.stringify(body); h['content-type'] ??= 'application/json'; }
  const res = await fetch(base + path, { method, headers: h, body: payload });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, headers: res.headers, text, json };
}

function assertProblem(r, status, code) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.headers.get('content-type'), PROBLEM);
  assert.equal(r.json.status, status);
  assert.equal(r.json.code, code);
  assert.equal(r.json.type, `https://sandcastle.dev/problems/${code}`);
  assert.equal(typeof r.json.title, 'string');
  assert.equal(typeof r.json.detail, 'string');
}

const cookieOf = (r) => (r.headers.get('set-cookie') ?? '').split(';')[0];

describe('REST API with auth on', () => {
  let state, srv, admin, user, base;
  before(async () => {
    state = tempStateDir();
    admin = JSON.parse(keys(state, '--json', 'create', '--name', 'ops', '--admin'));
    user = JSON.parse(keys(state, '--json', 'create', '--name', 'alice'));
    srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
    base = srv.base;
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('keys list shows the admin flag', () => {
    const list = JSON.parse(keys(state, '--json', 'list'));
    const byName = Object.fromEntries(list.map((k) => [k.name, k]));
    assert.equal(byName.ops.admin, true);
    assert.equal(byName.alice.admin, false);
    assert.match(keys(state, 'list'), /ADMIN/);
  });

  test('no key → 401 problem; a bad key → 401; unknown route → 404; wrong method → 405 with Allow', async () => {
    const none = await call(base, 'GET', '/api/v1/keys');
    assertProblem(none, 401, 'unauthorized');
    assert.match(none.headers.get('www-authenticate'), /^Bearer realm="sandcastle"/);
    assertProblem(await call(base, 'GET', '/api/v1/keys', { key: `${user.key}x` }), 401, 'unauthorized');
    assertProblem(await call(base, 'GET', '/api/v1/nope', { key: user.key }), 404, 'not_found');
    const m = await call(base, 'PUT', '/api/v1/session', { key: user.key });
    assertProblem(m, 405, 'method_not_allowed');
    assert.equal(m.headers.get('allow'), 'POST, GET, DELETE');
  });

  test('sign in: the cookie is HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP', async () => {
    const r = await call(base, 'POST', '/api/v1/session', { body: { api_key: user.key } });
    assert.equal(r.status, 200, r.text);
    const sc = r.headers.get('set-cookie');
    assert.match(sc, /^sc_session=[0-9a-f]{64}; /);
    assert.match(sc, /; HttpOnly/);
    assert.match(sc, /; SameSite=Strict/);
    assert.match(sc, /; Path=\//);
    assert.doesNotMatch(sc, /Secure/);
    assert.equal(r.json.key_id, user.id);
    assert.equal(r.json.admin, false);
    assert.ok(r.json.csrf_token.length >= 40);
    assert.ok(!r.text.includes(user.key), 'the key is not echoed');
    const s = await call(base, 'GET', '/api/v1/session', { cookie: cookieOf(r) });
    assert.deepEqual(s.json, { auth_required: true, authenticated: true, key_id: user.id, admin: false,
      csrf_token: r.json.csrf_token });
    const anon = await call(base, 'GET', '/api/v1/session');
    assert.deepEqual(anon.json, { auth_required: true, authenticated: false });
  });

  test('sign in with a bad key → 401; bad JSON → 400; not JSON → 415; too large → 413', async () => {
    assertProblem(await call(base, 'POST', '/api/v1/session', { body: { api_key: 'sc_nope_nope' } }), 401, 'unauthorized');
    assertProblem(await call(base, 'POST', '/api/v1/session', { body: {} }), 400, 'invalid_argument');
    assertProblem(await call(base, 'POST', '/api/v1/session', { raw: '{"api_key": ', headers: { 'content-type': 'application/json' } }),
      400, 'invalid_argument');
    assertProblem(await call(base, 'POST', '/api/v1/session', { raw: 'api_key=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      415, 'unsupported_media_type');
    assertProblem(await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { name: 'x'.repeat(8192) } }),
      413, 'payload_too_large');
  });

  test('CSRF: a cookie request with an unsafe method needs the session\'s token (403 csrf), and nothing changes', async () => {
    const a = await call(base, 'POST', '/api/v1/session', { body: { api_key: admin.key } });
    const cookie = cookieOf(a);
    const before = (await call(base, 'GET', '/api/v1/keys', { cookie })).json.keys.length;  // GET needs no token
    assertProblem(await call(base, 'POST', '/api/v1/keys', { cookie, body: { name: 'csrf-none' } }), 403, 'csrf');
    assertProblem(await call(base, 'POST', '/api/v1/keys', { cookie, csrf: 'wrong', body: { name: 'csrf-wrong' } }), 403, 'csrf');
    // Another session's token is not this one's.
    const other = await call(base, 'POST', '/api/v1/session', { body: { api_key: admin.key } });
    assertProblem(await call(base, 'POST', '/api/v1/keys', { cookie, csrf: other.json.csrf_token, body: { name: 'csrf-other' } }),
      403, 'csrf');
    assert.equal((await call(base, 'GET', '/api/v1/keys', { cookie })).json.keys.length, before, 'no key was created');
    const ok = await call(base, 'POST', '/api/v1/keys', { cookie, csrf: a.json.csrf_token, body: { name: 'csrf-ok' } });
    assert.equal(ok.status, 201, ok.text);
    // A header key needs no token.
    const hk = await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { name: 'by-header' } });
    assert.equal(hk.status, 201, hk.text);
  });

  test('admin only: a plain key gets 403 forbidden on /keys; an admin lists, creates (secret once) and revokes', async () => {
    assertProblem(await call(base, 'GET', '/api/v1/keys', { key: user.key }), 403, 'forbidden');
    assertProblem(await call(base, 'POST', '/api/v1/keys', { key: user.key, body: { name: 'nope', admin: true } }), 403, 'forbidden');
    const made = await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { name: 'temp' } });
    assert.equal(made.status, 201);
    assert.match(made.json.key, /^sc_[0-9a-f]+_/);
    assert.equal(made.json.admin, false);
    const list = await call(base, 'GET', '/api/v1/keys', { key: admin.key });
    const entry = list.json.keys.find((k) => k.id === made.json.id);
    assert.deepEqual(Object.keys(entry).sort(), ['admin', 'created_at', 'id', 'last_used_at', 'name', 'revoked_at']);
    assert.ok(!list.text.includes(made.json.key.slice(made.json.key.indexOf('_', 3) + 1)), 'no secret in the list');
    assertProblem(await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { admin: 'yes' } }), 400, 'invalid_argument');
    assertProblem(await call(base, 'DELETE', '/api/v1/keys/nosuchkey', { key: admin.key }), 404, 'not_found');
    assert.equal((await call(base, 'DELETE', `/api/v1/keys/${made.json.id}`, { key: admin.key })).status, 204);
    assertProblem(await call(base, 'DELETE', '/api/v1/session', { key: made.json.key }), 401, 'unauthorized');
  });

  test('revoking a key ends its browser sessions', async () => {
    const made = await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { name: 'browser' } });
    const s = await call(base, 'POST', '/api/v1/session', { body: { api_key: made.json.key } });
    const cookie = cookieOf(s);
    assert.equal((await call(base, 'GET', '/api/v1/session', { cookie })).json.authenticated, true);
    keys(state, 'revoke', made.json.id);  // by the CLI, another process
    const after = await call(base, 'DELETE', '/api/v1/session', { cookie, csrf: s.json.csrf_token });
    assertProblem(after, 401, 'unauthorized');
    assert.match(after.headers.get('set-cookie'), /Max-Age=0/);
    assert.equal((await call(base, 'GET', '/api/v1/session', { cookie })).json.authenticated, false);
  });

  test('logout ends the session: the cookie no longer works', async () => {
    const s = await call(base, 'POST', '/api/v1/session', { body: { api_key: admin.key } });
    const cookie = cookieOf(s);
    assertProblem(await call(base, 'DELETE', '/api/v1/session', { cookie }), 403, 'csrf');
    const out = await call(base, 'DELETE', '/api/v1/session', { cookie, csrf: s.json.csrf_token });
    assert.equal(out.status, 204);
    assert.match(out.headers.get('set-cookie'), /^sc_session=; .*Max-Age=0/);
    assertProblem(await call(base, 'GET', '/api/v1/keys', { cookie }), 401, 'unauthorized');
  });

  test('a foreign Origin is refused before anything runs', async () => {
    const r = await call(base, 'POST', '/api/v1/session', { body: { api_key: admin.key }, headers: { origin: 'https://evil.example' } });
    assertProblem(r, 403, 'forbidden');
    assert.equal(r.headers.get('set-cookie'), null);
  });

  test('last_used_at: null until a key is used, then when it was (GET /api/v1/keys)', async () => {
    const made = await call(base, 'POST', '/api/v1/keys', { key: admin.key, body: { name: 'used-later' } });
    assert.equal(made.status, 201, made.text);
    const entry = async () => (await call(base, 'GET', '/api/v1/keys', { key: admin.key })).json.keys
      .find((k) => k.id === made.json.id);
    assert.equal((await entry()).last_used_at, null);
    const t0 = Date.now();
    assert.equal((await call(base, 'GET', '/api/v1/sandboxes', { key: made.json.key })).status, 200);
    const used = (await entry()).last_used_at;
    assert.match(used ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(Math.abs(Date.parse(used) - t0) < 5000, used);
    assert.equal((await call(base, 'DELETE', `/api/v1/keys/${made.json.id}`, { key: admin.key })).status, 204);
  });

  test('the OpenAPI document is valid OpenAPI 3.1 and every path in it is routed; the walk leaves nothing behind', async () => {
    const activeKeys = async () => (await call(base, 'GET', '/api/v1/keys', { key: admin.key })).json.keys
      .filter((k) => !k.revoked_at).map((k) => k.id).sort();
    const sandboxes = async () => (await call(base, 'GET', '/api/v1/sandboxes', { key: admin.key })).json.sandboxes
      .map((x) => x.sandbox_id).sort();
    const keysBefore = await activeKeys();
    const sandboxesBefore = await sandboxes();
    const doc = (await call(base, 'GET', '/api/v1/openapi.json')).json;
    const validator = new Validator();
    const res = await validator.validate(doc);
    assert.ok(res.valid, JSON.stringify(res.errors, null, 1));
    assert.equal(validator.version, '3.1');
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of Object.keys(item)) {
        const concrete = path.replace(/\{[^}]+\}/g, 'p1');
        // Status and the start of the body only: some answers are endless streams.
        const ac = new AbortController();
        const res = await fetch(base + concrete, { method: method.toUpperCase(), headers: { authorization: `Bearer ${admin.key}` },
          signal: ac.signal });
        const first = res.body ? await res.body.getReader().read() : {};
        ac.abort();
        const text = first.value ? Buffer.from(first.value).toString('utf8') : '';
        assert.notEqual(res.status, 405, `${method} ${path}`);
        if (res.status === 404) assert.doesNotMatch(text, /no such API route|Not Found: MCP is served/, `${method} ${path}`);
      }
    }
    // What the walk made (a sandbox, a key) goes again.
    for (const id of (await sandboxes()).filter((x) => !sandboxesBefore.includes(x)))
      assert.equal((await call(base, 'DELETE', `/api/v1/sandboxes/${id}`, { key: admin.key })).status, 204);
    for (const id of (await activeKeys()).filter((x) => !keysBefore.includes(x)))
      assert.equal((await call(base, 'DELETE', `/api/v1/keys/${id}`, { key: admin.key })).status, 204);
    assert.deepEqual(await sandboxes(), sandboxesBefore);
    assert.deepEqual(await activeKeys(), keysBefore);
  });

  test('the OpenAPI document needs no key and describes the routes', async () => {
    const r = await call(base, 'GET', '/api/v1/openapi.json');
    assert.equal(r.status, 200);
    assert.equal(r.json.openapi, '3.1.0');
    for (const p of ['/api/v1/session', '/api/v1/keys', '/api/v1/keys/{key_id}', '/api/v1/openapi.json', '/mcp'])
      assert.ok(r.json.paths[p], p);
    assert.deepEqual(r.json.paths['/api/v1/keys'].get['x-admin-only'], true);
  });
});

describe('REST API behind TLS (an https public URL)', () => {
  let state, srv, k;
  before(async () => {
    state = tempStateDir();
    k = JSON.parse(keys(state, '--json', 'create', '--name', 'tls'));
    srv = await startHttp(['--auth', '--pool-size', '0', '--public-url', 'https://sandcastle.example'], { stateDir: state });
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('the session cookie is Secure', async () => {
    const r = await call(srv.base, 'POST', '/api/v1/session', { body: { api_key: k.key } });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('set-cookie'), /; HttpOnly; SameSite=Strict; Secure$/);
  });
});

describe('REST API with auth off (loopback)', () => {
  let srv;
  before(async () => { srv = await startHttp(['--pool-size', '0']); });
  after(async () => { await srv?.stop(); });

  test('the local user is signed in and an admin', async () => {
    const s = await call(srv.base, 'GET', '/api/v1/session');
    assert.deepEqual(s.json, { auth_required: false, authenticated: true, key_id: '', admin: true });
    const list = await call(srv.base, 'GET', '/api/v1/keys');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.json, { keys: [] });
    // Another local page (a loopback origin on another port) may not drive
    // the API, even with auth off; the server's own origin may.
    const before = (await call(srv.base, 'GET', '/api/v1/sandboxes')).json.sandboxes.length;
    const port = new URL(srv.base).port;
    assertProblem(await call(srv.base, 'POST', '/api/v1/sandboxes', { body: {}, headers: { origin: 'http://localhost:1' } }),
      403, 'forbidden');
    assertProblem(await call(srv.base, 'POST', '/api/v1/sandboxes/x/restart', { headers: { origin: 'http://127.0.0.1:1' } }),
      403, 'forbidden');
    assert.equal((await call(srv.base, 'GET', '/api/v1/sandboxes')).json.sandboxes.length, before, 'nothing created');
    const own = await call(srv.base, 'POST', '/api/v1/sandboxes', { body: { language: 'bash' }, headers: { origin: `http://127.0.0.1:${port}` } });
    assert.equal(own.status, 201, own.text);
    assert.equal((await call(srv.base, 'DELETE', `/api/v1/sandboxes/${own.json.sandbox_id}`, { headers: { origin: `http://127.0.0.1:${port}` } })).status, 204);
    // A key presented must still be valid.
    assertProblem(await call(srv.base, 'GET', '/api/v1/keys', { key: 'sc_nope_nope' }), 401, 'unauthorized');
  });
});

// --- the service routes ------------------------------------------------------

describe('REST API: sandboxes, executions, files, events (two keys)', () => {
  let state, srv, base, a, b, sid;
  const A = (m, p, o = {}) => call(base, m, p, { key: a.key, ...o });
  const B = (m, p, o = {}) => call(base, m, p, { key: b.key, ...o });
  const secretPath = `/tmp/sc-rest-secret-${process.pid}`;
  const secret = `host-secret-${Math.random().toString(36).slice(2)}`;
  before(async () => {
    state = tempStateDir();
    a = JSON.parse(keys(state, '--json', 'create', '--name', 'a'));
    b = JSON.parse(keys(state, '--json', 'create', '--name', 'b'));
    srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
    base = srv.base;
    const { writeFileSync } = await import('node:fs');
    writeFileSync(secretPath, secret);
    const r = await A('POST', '/api/v1/sandboxes', { body: { language: 'python' } });
    assert.equal(r.status, 201, r.text);
    sid = r.json.sandbox_id;
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
    rmSync(secretPath, { force: true });
  });

  test('health needs no key; metrics and images need one', async () => {
    const h = await call(base, 'GET', '/api/v1/health');
    assert.equal(h.status, 200);
    assert.equal(h.json.status, 'ok');
    for (const k of ['version', 'uptime_s', 'backend', 'sandboxes', 'warm_ready']) assert.ok(k in h.json, k);
    assertProblem(await call(base, 'GET', '/api/v1/metrics'), 401, 'unauthorized');
    const m = await A('GET', '/api/v1/metrics');
    assert.equal(m.status, 200);
    assert.ok(Object.keys(m.json.metrics).some((n) => n.startsWith('sandcastle_')), m.text.slice(0, 300));
    assert.equal((await A('GET', '/api/v1/images')).status, 200);
  });

  test('a sandbox is its key\'s: another key gets 404 not_found and changes nothing', async () => {
    const list = await A('GET', '/api/v1/sandboxes');
    assert.ok(list.json.sandboxes.some((s) => s.sandbox_id === sid));
    assert.equal((await B('GET', '/api/v1/sandboxes')).json.sandboxes.length, 0);
    assertProblem(await B('GET', `/api/v1/sandboxes/${sid}`), 404, 'not_found');
    assertProblem(await B('DELETE', `/api/v1/sandboxes/${sid}`), 404, 'not_found');
    assertProblem(await B('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { code: 'print(1)' } }), 404, 'not_found');
    assertProblem(await B('PUT', `/api/v1/sandboxes/${sid}/files/content?path=x.txt`, { raw: 'x' }), 404, 'not_found');
    assertProblem(await B('GET', `/api/v1/sandboxes/${sid}/files/content?path=x.txt`), 404, 'not_found');
    const g = await A('GET', `/api/v1/sandboxes/${sid}`);
    assert.equal(g.status, 200);
    assert.equal(g.json.status, 'running');
    assert.ok(g.json.usage && 'memory_bytes' in g.json.usage, g.text);
    assertProblem(await A('GET', '/api/v1/sandboxes/sb-nope'), 404, 'not_found');
  });

  test('bad input: bad JSON 400, not JSON 415, too large 413, bad kind 400', async () => {
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/executions`, { raw: '{"code":', headers: { 'content-type': 'application/json' } }),
      400, 'invalid_argument');
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/executions`, { raw: 'code=1', headers: { 'content-type': 'text/plain' } }),
      415, 'unsupported_media_type');
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { code: `x = "${'a'.repeat(1100000)}"` } }),
      413, 'payload_too_large');
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { kind: 'shell', code: '1' } }), 400, 'invalid_argument');
    assertProblem(await A('POST', '/api/v1/sandboxes', { body: { language: 42 } }), 400, 'invalid_argument');
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/history?limit=abc`), 400, 'invalid_argument');
  });

  test('executions: code and command as JSON; history records them', async () => {
    const r = await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { kind: 'code', code: 'x = 6\nprint(x * 7)' } });
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.stdout, /42/);
    const again = await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { code: 'print(x + 1)' } });
    assert.match(again.json.stdout, /7/, 'the kernel keeps its variables');
    const cmd = await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { kind: 'command', command: 'echo hi-there' } });
    assert.equal(cmd.status, 200, cmd.text);
    assert.match(cmd.json.stdout, /hi-there/);
    const h = await A('GET', `/api/v1/sandboxes/${sid}/history?limit=2`);
    assert.equal(h.status, 200, h.text);
  });

  test('executions over SSE: output as it comes, in order, then one result last', async () => {
    const res = await fetch(`${base}/api/v1/sandboxes/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'import sys, time\nprint("one", flush=True)\ntime.sleep(0.3)\nprint("two", flush=True)\nprint("err", file=sys.stderr, flush=True)' }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    const events = (await readSse(res)).filter((e) => !e.comment);
    const kinds = events.map((e) => e.event);
    assert.equal(kinds.at(-1), 'result', kinds.join());
    assert.equal(kinds.filter((k) => k === 'result').length, 1);
    const out = events.filter((e) => e.event === 'stdout').map((e) => e.data.text).join('');
    assert.match(out, /one\s+two/);
    assert.ok(events.some((e) => e.event === 'stderr' && /err/.test(e.data.text)), kinds.join());
    assert.ok(kinds.indexOf('stdout') < kinds.indexOf('result'));
    assert.match(events.at(-1).data.stdout, /one/);
  });

  test('interrupt stops a running cell (202)', async () => {
    const res = await fetch(`${base}/api/v1/sandboxes/${sid}/executions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ code: 'import time\nprint("start", flush=True)\nwhile True: time.sleep(0.05)', timeout_s: 60 }),
    });
    const done = readSse(res, (evs) => evs.some((e) => e.event === 'result'));
    // Wait for the run to be under way, then interrupt it.
    let r;
    for (let i = 0; i < 100; ++i) {
      r = await A('POST', `/api/v1/sandboxes/${sid}/interrupt`);
      if (r.status === 202 && r.json.interrupted) break;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.interrupted, true);
    const events = await done;
    const result = events.find((e) => e.event === 'result');
    assert.ok(result, JSON.stringify(events));
    assert.match(JSON.stringify(result.data), /KeyboardInterrupt|cancel/i);
  });

  test('files: PUT, list, download (attachment; inline only as text), multipart, delete', async () => {
    const put = await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=up.txt`, { raw: 'hello <b>x</b>' });
    assert.equal(put.status, 201, put.text);
    assert.equal(put.json.size, 14);
    const list = await A('GET', `/api/v1/sandboxes/${sid}/files`);
    assert.equal(list.status, 200, list.text);
    assert.ok(list.json.entries.some((e) => e.name === 'up.txt'), list.text);
    const dl = await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=up.txt`);
    assert.equal(dl.text, 'hello <b>x</b>');
    assert.match(dl.headers.get('content-disposition'), /^attachment; filename="up.txt"/);
    assert.equal(dl.headers.get('x-content-type-options'), 'nosniff');
    assert.match(dl.headers.get('content-security-policy'), /sandbox/);
    await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=page.html`, { raw: '<script>alert(1)</script>' });
    const html = await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=page.html&inline=1`);
    assert.match(html.headers.get('content-type'), /^text\/plain/, 'HTML is never rendered as the console');
    assert.match(html.headers.get('content-disposition'), /^inline/);

    const form = new FormData();
    form.append('path', 'uploads');
    form.append('file', new Blob(['one']), 'a.txt');
    form.append('file', new Blob([new Uint8Array([0, 1, 2, 255])]), 'b.bin');
    const up = await fetch(`${base}/api/v1/sandboxes/${sid}/files`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: form });
    const upj = await up.json();
    assert.equal(up.status, 201, JSON.stringify(upj));
    assert.deepEqual(upj.files.map((f) => f.size), [3, 4]);
    const b2 = await fetch(`${base}/api/v1/sandboxes/${sid}/files/content?path=uploads/b.bin`, { headers: { authorization: `Bearer ${a.key}` } });
    assert.deepEqual([...new Uint8Array(await b2.arrayBuffer())], [0, 1, 2, 255]);

    assert.equal((await A('DELETE', `/api/v1/sandboxes/${sid}/files?path=up.txt`)).status, 204);
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=up.txt`), 404, 'not_found');
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/files/content`), 400, 'invalid_argument');
    assertProblem(await A('DELETE', `/api/v1/sandboxes/${sid}/files?path=uploads`), 409, 'failed_precondition');
    assert.equal((await A('DELETE', `/api/v1/sandboxes/${sid}/files?path=uploads&recursive=1`)).status, 204);
  });

  test('multipart: a traversing name, a bad body or a missing boundary is refused and writes nothing', async () => {
    const form = new FormData();
    form.append('path', '.');
    form.append('file', new Blob(['ok']), 'first.txt');
    form.append('file', new Blob(['evil']), '../evil.txt');
    const r = await fetch(`${base}/api/v1/sandboxes/${sid}/files`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: form });
    // undici normalises nothing in the filename; the server refuses it.
    assert.equal(r.status, 400, await r.text());
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=first.txt`), 404, 'not_found');
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/files`, { raw: 'x', headers: { 'content-type': 'multipart/form-data' } }),
      415, 'unsupported_media_type');
    assertProblem(await A('POST', `/api/v1/sandboxes/${sid}/files`, { raw: '--q\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n\r\nabc',
      headers: { 'content-type': 'multipart/form-data; boundary=q' } }), 400, 'invalid_argument');
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=x`), 404, 'not_found');
  });

  test('multipart is all or none: a 2nd part aimed at an existing directory leaves none of the 3 files (nor a temp)', async () => {
    assert.equal((await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=allornone/taken/keep.txt`, { raw: 'k' })).status, 201);
    assert.equal((await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=allornone/one.txt`, { raw: 'before' })).status, 201);
    const form = new FormData();
    form.append('path', 'allornone');
    form.append('file', new Blob(['first']), 'one.txt');
    form.append('file', new Blob(['second']), 'taken');
    form.append('file', new Blob(['third']), 'three.txt');
    const r = await fetch(`${base}/api/v1/sandboxes/${sid}/files`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: form });
    const body = await r.json();
    assert.equal(r.status, 409, JSON.stringify(body));
    assert.equal(body.code, 'failed_precondition');
    const list = await A('GET', `/api/v1/sandboxes/${sid}/files?path=allornone`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.json.entries.map((e) => `${e.name}:${e.type}`).sort(), ['one.txt:file', 'taken:directory'], list.text);
    assert.equal((await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=allornone/one.txt`)).text, 'before');
    // The same upload without the bad part goes through, replacing one.txt.
    const ok = new FormData();
    ok.append('path', 'allornone/new/deeper');
    ok.append('file', new Blob(['first']), 'one.txt');
    ok.append('file', new Blob(['third']), 'three.txt');
    const r2 = await fetch(`${base}/api/v1/sandboxes/${sid}/files`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: ok });
    assert.equal(r2.status, 201, await r2.text());
    const deeper = await A('GET', `/api/v1/sandboxes/${sid}/files?path=allornone/new/deeper`);
    assert.deepEqual(deeper.json.entries.map((e) => e.name).sort(), ['one.txt', 'three.txt'], deeper.text);
    assert.equal((await A('DELETE', `/api/v1/sandboxes/${sid}/files?path=allornone&recursive=1`)).status, 204);
  });

  test('path traversal: ../, an absolute host path, a symlink pointing out: the host file is never read', async () => {
    const ln = await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { kind: 'command', command: `ln -sf ${secretPath} link && ls -l link` } });
    assert.equal(ln.status, 200, ln.text);
    // '..' is refused as such; the others resolve inside the sandbox, where the host's /tmp is not.
    for (const [p, status, code] of [[`../../../../../../..${secretPath}`, 400, 'invalid_argument'],
      [secretPath, 404, 'not_found'], ['link', 404, 'not_found'], [`/proc/1/root${secretPath}`, 403, 'permission_denied']]) {
      const r = await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=${encodeURIComponent(p)}`);
      assert.ok(!r.text.includes(secret), `${p} leaked the host file`);
      assertProblem(r, status, code);
    }
    // Writing through the link lands inside the sandbox, never on the host.
    await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=link`, { raw: 'overwritten' });
    assertProblem(await A('PUT', `/api/v1/sandboxes/${sid}/files/content?path=${encodeURIComponent(`../..${secretPath}`)}`, { raw: 'x' }),
      400, 'invalid_argument');
    const { readFileSync } = await import('node:fs');
    assert.equal(readFileSync(secretPath, 'utf8'), secret, 'the host file is unchanged');
  });

  test('events: snapshot, upsert on create, remove on close, only for the caller', async () => {
    const res = await fetch(`${base}/api/v1/events`, { headers: { authorization: `Bearer ${a.key}` } });
    assert.equal(res.status, 200);
    const resB = await fetch(`${base}/api/v1/events`, { headers: { authorization: `Bearer ${b.key}` } });
    let created;
    const seen = readSse(res, (evs) => created && evs.some((e) => e.event === 'remove' && e.data.sandbox_id === created));
    const seenB = readSse(resB, () => false, 4000);
    await new Promise((ok) => setTimeout(ok, 200));
    const c = await A('POST', '/api/v1/sandboxes', { body: { language: 'bash' } });
    assert.equal(c.status, 201, c.text);
    created = c.json.sandbox_id;
    assert.equal((await A('DELETE', `/api/v1/sandboxes/${created}`)).status, 204);
    const events = (await seen).filter((e) => !e.comment);
    assert.equal(events[0].event, 'snapshot');
    assert.ok(events[0].data.sandboxes.some((s) => s.sandbox_id === sid));
    const iu = events.findIndex((e) => e.event === 'upsert' && e.data.sandbox.sandbox_id === created);
    const ir = events.findIndex((e) => e.event === 'remove' && e.data.sandbox_id === created);
    assert.ok(iu > 0 && ir > iu, events.map((e) => e.event).join());
    const eventsB = (await seenB).filter((e) => !e.comment);
    assert.equal(eventsB[0].event, 'snapshot');
    assert.deepEqual(eventsB[0].data.sandboxes, []);
    assert.ok(!JSON.stringify(eventsB).includes(created), 'B saw none of A\'s sandboxes');
  });

  test('events: usage only for sandboxes whose numbers changed (a settled idle one sends nothing)', async () => {
    const idle = await A('POST', '/api/v1/sandboxes', { body: { language: 'bash' } });
    const busy = await A('POST', '/api/v1/sandboxes', { body: { language: 'bash' } });
    const res = await fetch(`${base}/api/v1/events`, { headers: { authorization: `Bearer ${a.key}` } });
    const reading = readSse(res, () => false, 15000);
    // A new sandbox's first helpers come and go for ~6 s (usage events for
    // it meanwhile); then it is idle. The busy one spins for 5 s after that.
    await new Promise((ok) => setTimeout(ok, 6000));
    const busyFrom = Date.now();
    await A('POST', `/api/v1/sandboxes/${busy.json.sandbox_id}/executions`,
      { body: { kind: 'command', command: 'end=$((SECONDS+5)); while [ $SECONDS -lt $end ]; do :; done', timeout_s: 20 } });
    const later = (await reading).filter((e) => e.event === 'usage' && e.t > busyFrom);
    const ids = later.flatMap((e) => e.data.samples.map((x) => x.sandbox_id));
    assert.ok(ids.includes(busy.json.sandbox_id), JSON.stringify(later));
    assert.ok(!ids.includes(idle.json.sandbox_id), JSON.stringify(later));
    for (const id of [idle.json.sandbox_id, busy.json.sandbox_id]) await A('DELETE', `/api/v1/sandboxes/${id}`);
  });

  test('terminal: a shell over a WebSocket (binary both ways, resize, exit code, close 1000)', async () => {
    assertProblem(await A('GET', `/api/v1/sandboxes/${sid}/terminal`), 426, 'invalid_argument');
    const url = `${base.replace('http', 'ws')}/api/v1/sandboxes/${sid}/terminal?cols=100&rows=30`;
    const refused = (headers) => new Promise((resolve) => {
      const ws = new WebSocket(url, { headers });
      ws.on('unexpected-response', (_req, res) => { resolve(res.statusCode); ws.terminate(); });
      ws.on('open', () => { resolve('open'); ws.close(); });
      ws.on('error', () => {});
    });
    assert.equal(await refused({}), 401);
    assert.equal(await refused({ authorization: `Bearer ${b.key}` }), 404);
    assert.equal(await refused({ authorization: `Bearer ${a.key}`, origin: 'https://evil.example' }), 403);
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${a.key}` } });
    let out = '';
    const texts = [];
    const closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
    ws.on('message', (data, isBinary) => { if (isBinary) out += data.toString('utf8'); else texts.push(JSON.parse(data.toString())); });
    await new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); });
    ws.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
    ws.send(Buffer.from('stty size; echo hello-$((6*7)); tty\n'), { binary: true });
    for (let i = 0; i < 200 && !/hello-42/.test(out); ++i) await new Promise((ok) => setTimeout(ok, 50));
    assert.match(out, /hello-42/);
    assert.match(out, /40 120/, 'the resize reached the pty');
    assert.match(out, /\/dev\/pts\//);
    ws.send(Buffer.from('exit 3\n'), { binary: true });
    assert.equal(await closed, 1000);
    assert.deepEqual(texts.at(-1), { type: 'exit', code: 3 });
  });

  test('terminal: hostile control frames and input nobody reads end that terminal only (1003, 1008); the server lives', async () => {
    const url = `${base.replace('http', 'ws')}/api/v1/sandboxes/${sid}/terminal`;
    const open = async () => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${a.key}` }, maxPayload: 1 << 20 });
      const closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
      ws.on('error', () => {});
      await new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); });
      return { ws, closed };
    };
    // A field of the wrong type, deep nesting, a resize out of range: "bad message", not a crash.
    for (const frame of ['{"type":1}', '{"type":"resize","cols":"80","rows":24}', '['.repeat(60000),
      '{"type":"resize","cols":100000,"rows":24}', 'not json']) {
      const { ws, closed } = await open();
      ws.send(frame);
      assert.equal(await closed, 1003, frame.slice(0, 40));
      assert.equal((await A('GET', '/api/v1/health')).status, 200, 'the server still answers');
    }
    // A shell that reads nothing (sleep in the foreground): input is held up to its
    // limit, then the terminal closes 1008, instead of server memory growing.
    const { ws, closed } = await open();
    // Raw mode: the line discipline then stops taking input when its buffer is full
    // (canonical mode would take and drop it).
    ws.send(Buffer.from('stty raw -echo; sleep 600\n'), { binary: true });
    const chunk = Buffer.alloc(60 * 1024, 'x');
    let sent = 0;
    const result = await Promise.race([closed, (async () => {
      while (sent < 64 * 1024 * 1024 && ws.readyState === WebSocket.OPEN) {
        ws.send(chunk, { binary: true });
        sent += chunk.length;
        await new Promise((ok) => setImmediate(ok));  // let the close frame in
        while (ws.bufferedAmount > (1 << 20) && ws.readyState === WebSocket.OPEN) await new Promise((ok) => setTimeout(ok, 5));
      }
      return closed;
    })()]);
    assert.equal(result, 1008);
    // What the server took before it closed is bounded (its 256 KiB queue, plus socket buffers).
    assert.ok(sent < 8 * 1024 * 1024, `closed after ${sent} bytes`);
    assert.equal((await A('GET', '/api/v1/health')).status, 200);
  });

  test('delete: 204, then 404', async () => {
    const c = await A('POST', '/api/v1/sandboxes', { body: { language: 'bash' } });
    assert.equal((await A('DELETE', `/api/v1/sandboxes/${c.json.sandbox_id}`)).status, 204);
    assertProblem(await A('GET', `/api/v1/sandboxes/${c.json.sandbox_id}`), 404, 'not_found');
  });
});

describe('REST API: per-key limits (event streams, terminals) and a run whose client left', () => {
  let state, srv, base, a, b, sid;
  const A = (m, p, o = {}) => call(base, m, p, { key: a.key, ...o });
  before(async () => {
    state = tempStateDir();
    a = JSON.parse(keys(state, '--json', 'create', '--name', 'a'));
    b = JSON.parse(keys(state, '--json', 'create', '--name', 'b'));
    srv = await startHttp(['--auth', '--pool-size', '0', '--max-streams-per-key', '2', '--max-terminals-per-key', '1'],
      { stateDir: state });
    base = srv.base;
    const r = await A('POST', '/api/v1/sandboxes', { body: { language: 'python' } });
    assert.equal(r.status, 201, r.text);
    sid = r.json.sandbox_id;
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  // An open /events stream, once its snapshot arrived.
  async function openEvents(key) {
    const ac = new AbortController();
    const res = await fetch(`${base}/api/v1/events`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal });
    if (res.status !== 200) return { res, close: () => ac.abort() };
    const reader = res.body.getReader();
    const first = await reader.read();
    assert.match(Buffer.from(first.value).toString('utf8'), /event: snapshot/);
    return { res, close: () => { ac.abort(); reader.cancel().catch(() => {}); } };
  }

  test('event streams: the third of one key is 429 with Retry-After; another key is not held back; one closed frees a slot', async () => {
    const s1 = await openEvents(a.key);
    const s2 = await openEvents(a.key);
    assert.equal(s1.res.status, 200);
    assert.equal(s2.res.status, 200);
    const third = await call(base, 'GET', '/api/v1/events', { key: a.key });
    assertProblem(third, 429, 'resource_exhausted');
    assert.equal(third.headers.get('retry-after'), '1');
    const other = await openEvents(b.key);
    assert.equal(other.res.status, 200);
    other.close();
    s1.close();
    // The server learns of the closed stream when its socket ends.
    let next;
    for (let i = 0; i < 100; ++i) {
      next = await openEvents(a.key);
      if (next.res.status === 200) break;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    assert.equal(next.res.status, 200);
    next.close();
    s2.close();
  });

  test('terminals: the second of one key is 429; after the first closes the next opens', async () => {
    const url = `${base.replace('http', 'ws')}/api/v1/sandboxes/${sid}/terminal`;
    const open = () => new Promise((resolve) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${a.key}` } });
      ws.on('unexpected-response', (_req, res) => { resolve({ status: res.statusCode }); ws.terminate(); });
      ws.on('open', () => resolve({ status: 101, ws, closed: new Promise((ok) => ws.on('close', ok)) }));
      ws.on('error', () => {});
    });
    const first = await open();
    assert.equal(first.status, 101);
    assert.equal((await open()).status, 429);
    first.ws.close();
    await first.closed;
    let next;
    for (let i = 0; i < 100; ++i) {
      next = await open();
      if (next.status === 101) break;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    assert.equal(next.status, 101);
    next.ws.close();
    await next.closed;
  });

  test('a run without SSE is cancelled when its client disconnects: the kernel is free again at once', async () => {
    const ac = new AbortController();
    const long = fetch(`${base}/api/v1/sandboxes/${sid}/executions`, {
      method: 'POST', signal: ac.signal,
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'open("started", "w").close()\nimport time\ntime.sleep(120)', timeout_s: 300 }),
    }).catch((e) => e);
    // Wait until the cell runs (its file appears), then go away.
    let seen;
    for (let i = 0; i < 200; ++i) {
      seen = await A('GET', `/api/v1/sandboxes/${sid}/files/content?path=started`);
      if (seen.status === 200) break;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    assert.equal(seen.status, 200, seen.text);
    ac.abort();
    assert.equal((await long).name, 'AbortError');
    const t0 = Date.now();
    const next = await A('POST', `/api/v1/sandboxes/${sid}/executions`, { body: { code: 'print("after")' } });
    assert.equal(next.status, 200, next.text);
    assert.match(next.json.stdout, /after/);
    assert.ok(Date.now() - t0 < 30000, `the next run waited ${Date.now() - t0} ms`);
  });
});
