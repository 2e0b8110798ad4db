// The REST API under /api/v1 (docs/rest-api.md) against the real server
// binary: authentication by key header or browser session (cookie flags,
// CSRF, logout, revocation), admin-only keys, problem+json errors (401, 403,
// 404, 405, 413, 415, 400), and the OpenAPI document.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { keys, startHttp, tempStateDir } from './lib/http.mjs';

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

  test('the OpenAPI document needs no key and describes the routes', async () => {
    const r = await call(base, 'GET', '/api/v1/openapi.json');
    assert.equal(r.status, 200);
    assert.equal(r.json.openapi, '3.1.0');
    for (const p of ['/api/v1/session', '/api/v1/keys', '/api/v1/keys/{key_id}', '/api/v1/openapi.json', '/mcp'])
      assert.ok(r.json.paths[p], p);
    assert.deepEqual(r.json.paths['/api/v1/keys'].get['x-admin-only'], true);
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
    // A key presented must still be valid.
    assertProblem(await call(srv.base, 'GET', '/api/v1/keys', { key: 'sc_nope_nope' }), 401, 'unauthorized');
  });
});
