// The HTTP transport on the wire: Streamable HTTP rules of both eras, the
// HTTP+SSE transport, resumption, DNS-rebinding protection, limits and
// hostile clients (slow-loris, oversized and malformed requests), metrics
// and graceful shutdown. Each misbehaving client is answered while others
// keep being served.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { modernMeta, sleep } from './lib/harness.mjs';
import { INIT, JSON_AND_SSE, modernHeaders, openSession, parseSse, post, startHttp } from './lib/http.mjs';

let srv;
before(async () => {
  srv = await startHttp(['--test-fixtures', '--max-body-bytes', '65536', '--request-timeout-ms', '1500',
    '--keepalive-ms', '300', '--allowed-origins', 'https://app.example.com']);
});
after(async () => { await srv?.stop(); });

// A raw TCP exchange: writes `data`, resolves with everything read until close or `ms`.
function raw(data, { ms = 3000, chunks } = {}) {
  return new Promise((resolve) => {
    const u = new URL(srv.base);
    const sock = net.connect(Number(u.port), u.hostname);
    let out = '';
    const started = Date.now();
    const done = () => { sock.destroy(); resolve({ text: out, ms: Date.now() - started }); };
    sock.on('data', (d) => { out += d.toString('utf8'); });
    sock.on('close', done);
    sock.on('error', done);
    setTimeout(done, ms);
    sock.on('connect', async () => {
      if (chunks) {
        for (const c of chunks) { if (sock.destroyed) break; sock.write(c); await sleep(200); }
      } else {
        sock.write(data);
      }
    });
  });
}

async function healthy() {
  const r = await fetch(`${srv.base}/healthz`);
  assert.equal(r.status, 200);
}

describe('legacy era (Streamable HTTP)', () => {
  test('initialize answers JSON with Mcp-Session-Id; notifications get 202', async () => {
    const r = await post(srv.url, INIT('2025-06-18'));
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /application\/json/);
    assert.equal(r.body.result.protocolVersion, '2025-06-18');
    const sid = r.headers.get('mcp-session-id');
    assert.match(sid, /^[\x21-\x7e]+$/);
    const n = await post(srv.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid });
    assert.equal(n.status, 202);
    assert.equal(n.text, '');
  });

  test('missing session id → 400, unknown → 404, bad MCP-Protocol-Version → 400, absent version accepted', async () => {
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    assert.equal((await post(srv.url, list)).status, 400);
    assert.equal((await post(srv.url, list, { 'mcp-session-id': 'nope' })).status, 404);
    const { sid } = await openSession(srv.url);
    assert.equal((await post(srv.url, list, { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' })).status, 400);
    const ok = await post(srv.url, list, { 'mcp-session-id': sid });
    assert.equal(ok.status, 200);
    assert.ok(ok.body.result.tools.length > 0);
  });

  test('a response to a client POST is answered 202', async () => {
    const { headers } = await openSession(srv.url);
    const r = await post(srv.url, { jsonrpc: '2.0', id: 'x-1', result: {} }, headers);
    assert.equal(r.status, 202);
  });

  test('tools/call streams SSE with event ids, a priming event and the result last', async () => {
    const { headers } = await openSession(srv.url);
    const r = await post(srv.url, { jsonrpc: '2.0', id: 7, method: 'tools/call',
      params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: 'p' } } }, headers);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /text\/event-stream/);
    assert.equal(r.headers.get('x-accel-buffering'), 'no');
    const evs = r.body.filter((e) => e.id);
    assert.ok(evs[0].retry && !evs[0].json, 'priming event first, with retry');
    const msgs = evs.filter((e) => e.json).map((e) => e.json);
    assert.deepEqual(msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress), [0, 50, 100]);
    assert.equal(msgs.at(-1).id, 7);
    assert.ok(new Set(evs.map((e) => e.id)).size === evs.length, 'event ids unique');
  });

  test('a dropped POST stream is not a cancellation: GET with Last-Event-ID resumes it', async () => {
    const { headers } = await openSession(srv.url);
    const ac = new AbortController();
    const res = await fetch(srv.url, { method: 'POST', signal: ac.signal,
      headers: { ...headers, 'content-type': 'application/json', accept: JSON_AND_SSE },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 600 } } }) });
    const reader = res.body.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const lastId = parseSse(first).filter((e) => e.id).at(-1).id;
    ac.abort();
    const g = await fetch(srv.url, { headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastId } });
    assert.equal(g.status, 200);
    const evs = parseSse(await g.text());  // the stream ends after the result
    const result = evs.find((e) => e.json?.id === 'slow');
    assert.ok(result, `result replayed: ${JSON.stringify(evs)}`);
    assert.ok(result.json.result.structuredContent.slept_ms >= 500);
  });

  // The client may resume before the server has seen its old connection go
  // (seen in CI as a 409): a resume takes the stream over, whatever state
  // the first connection is in.
  test('a resume while the first connection still stands takes the stream over', async () => {
    const { headers } = await openSession(srv.url);
    const res = await fetch(srv.url, { method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: JSON_AND_SSE },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'held', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 600 } } }) });
    const reader = res.body.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const lastId = parseSse(first).filter((e) => e.id).at(-1).id;
    const g = await fetch(srv.url, { headers: { ...headers, accept: 'text/event-stream', 'last-event-id': lastId } });
    assert.equal(g.status, 200);
    const evs = parseSse(await g.text());
    const result = evs.find((e) => e.json?.id === 'held');
    assert.ok(result, `result on the resumed stream: ${JSON.stringify(evs)}`);
    assert.ok(result.json.result.structuredContent.slept_ms >= 500);
    // The first connection's stream was ended, without the result.
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    assert.ok(!parseSse(rest).some((e) => e.json?.id === 'held'), rest);
  });

  test('GET opens the standalone stream; a second one at once is 409; keep-alive comments flow', async () => {
    const { headers } = await openSession(srv.url);
    const ac = new AbortController();
    const g = await fetch(srv.url, { headers: { ...headers, accept: 'text/event-stream' }, signal: ac.signal });
    assert.equal(g.status, 200);
    const second = await fetch(srv.url, { headers: { ...headers, accept: 'text/event-stream' } });
    assert.equal(second.status, 409);
    const reader = g.body.getReader();
    let text = '';
    const until = Date.now() + 2000;
    while (!text.includes(': keep-alive') && Date.now() < until) text += new TextDecoder().decode((await reader.read()).value);
    assert.match(text, /: keep-alive/);
    ac.abort();
  });

  test('DELETE ends the session; afterwards 404', async () => {
    const { headers } = await openSession(srv.url);
    const d = await fetch(srv.url, { method: 'DELETE', headers });
    assert.equal(d.status, 200);
    assert.equal((await post(srv.url, { jsonrpc: '2.0', id: 1, method: 'ping' }, headers)).status, 404);
  });

  test('batches only with 2025-03-26', async () => {
    const a = await openSession(srv.url, { version: '2025-03-26' });
    const batch = [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' }];
    const r = await post(srv.url, batch, a.headers);
    assert.equal(r.status, 200);
    const replies = Array.isArray(r.body) ? r.body : r.body.find((e) => Array.isArray(e.json)).json;
    assert.deepEqual(replies.map((x) => x.id).sort(), [1, 2]);
    const b = await openSession(srv.url, { version: '2025-06-18' });
    assert.equal((await post(srv.url, batch, b.headers)).status, 400);
  });
});

describe('modern era (2026-07-28, stateless)', () => {
  const call = (name, args = {}, meta = {}) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name, arguments: args, _meta: modernMeta(meta) } });

  test('a POST is served without a session', async () => {
    const r = await post(srv.url, call('test_echo', { text: 'x' }), modernHeaders('tools/call', 'test_echo'));
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('mcp-session-id'), null);
    assert.equal(r.body.result.resultType, 'complete');
  });

  test('Mcp-Method / Mcp-Name / MCP-Protocol-Version must match the body (-32020, 400)', async () => {
    for (const h of [modernHeaders('tools/list', 'test_echo'), modernHeaders('tools/call', 'other'),
      { ...modernHeaders('tools/call', 'test_echo'), 'mcp-protocol-version': '2025-11-25' },
      { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call' }]) {
      const r = await post(srv.url, call('test_echo', { text: 'x' }), h);
      assert.equal(r.status, 400, JSON.stringify(h));
      assert.equal(r.body.error.code, -32020, JSON.stringify(r.body));
    }
  });

  test('Mcp-Name may be base64-encoded', async () => {
    const h = modernHeaders('tools/call', `=?base64?${Buffer.from('test_echo').toString('base64')}?=`);
    const r = await post(srv.url, call('test_echo', { text: 'b64' }), h);
    assert.equal(r.status, 200, r.text);
  });

  test('unsupported version → 400 -32022; unknown method → 404 -32601; GET/DELETE → 405', async () => {
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list',
      params: { _meta: modernMeta({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }) } };
    const bad = await post(srv.url, body, { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, -32022);
    const nf = await post(srv.url, { jsonrpc: '2.0', id: 1, method: 'no/such', params: { _meta: modernMeta() } },
      modernHeaders('no/such'));
    assert.equal(nf.status, 404);
    assert.equal(nf.body.error.code, -32601);
    for (const method of ['GET', 'DELETE']) {
      const r = await fetch(srv.url, { method, headers: { 'mcp-protocol-version': '2026-07-28', accept: 'text/event-stream' } });
      assert.equal(r.status, 405, method);
    }
  });

  test('closing the stream cancels the request', async () => {
    const before = await (await fetch(`${srv.base}/metrics`)).text();
    const count = (t) => Number(t.match(/sandcastle_tool_calls_total\{tool="test_sleep",outcome="cancelled"\} (\d+)/)?.[1] ?? 0);
    const ac = new AbortController();
    const started = Date.now();
    const p = fetch(srv.url, { method: 'POST', signal: ac.signal,
      headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, ...modernHeaders('tools/call', 'test_sleep') },
      body: JSON.stringify(call('test_sleep', { ms: 20000 }, { progressToken: 1 })) });
    const res = await p;
    const reader = res.body.getReader();
    await reader.read();  // the first progress event: the call is running
    ac.abort();
    let after = '';
    for (let i = 0; i < 50 && count(after) <= count(before); i++) {
      await sleep(50);
      after = await (await fetch(`${srv.base}/metrics`)).text();
    }
    assert.equal(count(after), count(before) + 1, 'the call ended as cancelled');
    assert.ok(Date.now() - started < 5000);
  });
});

describe('HTTP+SSE transport (/sse + /messages)', () => {
  test('endpoint event, replies as message events, 202 on POST, unknown session 404', async () => {
    const ac = new AbortController();
    const g = await fetch(srv.sseUrl, { headers: { accept: 'text/event-stream' }, signal: ac.signal });
    assert.equal(g.status, 200);
    const reader = g.body.getReader();
    let text = '';
    while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
    const ep = parseSse(text).find((e) => e.event === 'endpoint');
    assert.match(ep.data, /^\/messages\?sessionId=[0-9a-f]{32}$/);
    const r = await post(`${srv.base}${ep.data}`, INIT('2024-11-05'));
    assert.equal(r.status, 202);
    while (!text.includes('"protocolVersion"')) text += new TextDecoder().decode((await reader.read()).value);
    const msg = parseSse(text).find((e) => e.event === 'message');
    assert.equal(msg.json.result.protocolVersion, '2024-11-05');
    ac.abort();
    assert.equal((await post(`${srv.base}/messages?sessionId=0000`, { jsonrpc: '2.0', id: 1, method: 'ping' })).status, 404);
  });
});

describe('DNS-rebinding protection and CORS', () => {
  test('a foreign Host or Origin → 403; loopback and configured origins pass', async () => {
    const hostile = await raw(`POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    assert.match(hostile.text, /^HTTP\/1\.1 403/);
    const origin = await post(srv.url, INIT(), { origin: 'http://evil.example.com' });
    assert.equal(origin.status, 403);
    assert.equal((await post(srv.url, INIT(), { origin: 'http://localhost:3000' })).status, 200);
    assert.equal((await post(srv.url, INIT(), { origin: 'https://app.example.com' })).status, 200);
  });

  test('no CORS headers unless configured', async () => {
    const r = await post(srv.url, INIT(), { origin: 'http://localhost:3000' });
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    const pre = await fetch(srv.url, { method: 'OPTIONS', headers: { origin: 'http://localhost:3000' } });
    assert.equal(pre.status, 405);
  });
});

describe('limits and hostile clients', () => {
  test('an oversized body → 413, and the server keeps serving', async () => {
    const r = await post(srv.url, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(100000) } }));
    assert.equal(r.status, 413);
    await healthy();
  });

  test('a slow-loris client is cut off at the request timeout while others are served', async () => {
    const slow = raw(null, { ms: 6000, chunks: Array.from({ length: 25 }, (_, i) => (i === 0 ? 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n' : `X-Drip-${i}: y\r\n`)) });
    for (let i = 0; i < 5; i++) { await healthy(); await sleep(100); }
    const r = await slow;
    assert.ok(r.ms < 4000, `connection closed after ${r.ms} ms`);
    assert.match(r.text, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  });

  test('malformed request lines and headers → 400; oversized headers → 431', async () => {
    assert.match((await raw('GARBAGE\r\n\r\n')).text, /^HTTP\/1\.1 400/);
    assert.match((await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n')).text, /^HTTP\/1\.1 400/);
    assert.match((await raw(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`)).text, /^HTTP\/1\.1 431/);
    await healthy();
  });

  test('a keep-alive response says how long an idle connection stays open (the request timeout)', async () => {
    // With --request-timeout-ms 1500 that is 1 s: undici then stops reusing
    // the connection before the server closes it, rather than racing the close.
    const r = await fetch(`${srv.base}/healthz`);
    await r.text();
    assert.equal(r.headers.get('keep-alive'), 'timeout=1');
    assert.equal(r.headers.get('connection'), null);
    const close = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    assert.match(close.text, /\r\nConnection: close\r\n/);
    assert.doesNotMatch(close.text, /Keep-Alive:/i);
  });

  test('invalid JSON → 400 -32700; wrong Content-Type → 415; bad Accept → 406', async () => {
    const bad = await post(srv.url, '{"jsonrpc":');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, -32700);
    const ct = await fetch(srv.url, { method: 'POST', headers: { 'content-type': 'text/plain', accept: JSON_AND_SSE }, body: '{}' });
    assert.equal(ct.status, 415);
    assert.equal((await post(srv.url, INIT(), { accept: 'text/html' })).status, 406);
  });
});

describe('operations', () => {
  test('/metrics speaks Prometheus text', async () => {
    const t = await (await fetch(`${srv.base}/metrics`)).text();
    for (const m of ['sandcastle_sandboxes_live', 'sandcastle_http_requests_total', 'sandcastle_tool_calls_total',
      'sandcastle_tool_call_duration_seconds_bucket', 'sandcastle_mcp_sessions_live', 'sandcastle_sse_streams_open'])
      assert.match(t, new RegExp(`^${m}`, 'm'), m);
    assert.match(t, /# TYPE sandcastle_http_requests_total counter/);
  });

  test('SIGTERM: an in-flight call finishes and answers, then the process exits 0', async () => {
    const s = await startHttp(['--test-fixtures']);
    const { headers } = await openSession(s.url);
    const pending = post(s.url, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 300 } } }, headers);
    await sleep(100);
    s.proc.kill('SIGTERM');
    const r = await pending;
    const res = Array.isArray(r.body) ? r.body.find((e) => e.json?.id === 5)?.json : r.body;
    assert.ok(res?.result?.structuredContent?.slept_ms >= 250, JSON.stringify(r.body));
    const { code } = await s.stop();
    assert.equal(code, 0);
  });
});

describe('bounded JSON in request bodies', () => {
  // Nesting crashed the server (a copy or walk recursing 100k deep overflows
  // its thread's stack); now every body goes through one bounded parser.
  test('100k-deep arrays or objects in a body → 400 -32600 naming the depth limit; the server keeps serving', async () => {
    const s = await startHttp(['--test-fixtures']);
    try {
      const { headers } = await openSession(s.url);
      const deepArr = '['.repeat(100000) + ']'.repeat(100000);
      const deepObj = '{"a":'.repeat(100000) + '1' + '}'.repeat(100000);
      const bodies = [deepArr, deepObj, '['.repeat(100000),
        `{"jsonrpc":"2.0","id":"d1","method":"ping","params":{"x":${deepArr}}}`,
        `{"jsonrpc":"2.0","id":"d2","method":"tools/call","params":{"name":"test_echo","arguments":{"text":"a","x":${deepObj}}}}`];
      for (const [i, b] of bodies.entries()) {
        const r = await post(s.url, b, headers);
        assert.equal(r.status, 400, `body ${i}: ${r.text.slice(0, 200)}`);
        assert.equal(r.body.error.code, -32600);
        assert.match(r.body.error.message, /deeper than the limit of 128 levels/);
        const p = await post(s.url, { jsonrpc: '2.0', id: `alive-${i}`, method: 'ping' }, headers);
        assert.deepEqual(p.body.result, {}, `still serving after body ${i}`);
      }
      // A flat body with more values than the parser builds is refused too.
      const wide = await post(s.url, `{"jsonrpc":"2.0","id":"w","method":"ping","params":{"x":[${'0,'.repeat(300000)}0]}}`, headers);
      assert.equal(wide.status, 400);
      assert.equal(wide.body.error.code, -32600);
      assert.match(wide.body.error.message, /more than the limit of 262144 values/);
      // Ordinary calls go on.
      const ok = await post(s.url, { jsonrpc: '2.0', id: 'ok', method: 'tools/call', params: { name: 'test_echo', arguments: { text: 'a' } } }, headers);
      const res = Array.isArray(ok.body) ? ok.body.find((e) => e.json?.id === 'ok')?.json : ok.body;
      assert.equal(res?.result?.structuredContent?.text, 'a', ok.text.slice(0, 300));
      await fetch(`${s.base}/healthz`).then((r) => assert.equal(r.status, 200));
    } finally {
      await s.stop();
    }
  });
});
