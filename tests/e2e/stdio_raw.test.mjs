// Raw stdio protocol tests: spawn the binary, write lines, read lines. These
// cover what the SDKs hide: exact id echo, error codes for bad input, batches,
// framing at EOF, shutdown, and that stdout carries only JSON-RPC lines.
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LEGACY_VERSIONS, MODERN, RawServer, modernMeta, sleep } from './lib/harness.mjs';

const servers = [];
function start(args) {
  const s = new RawServer(args);
  servers.push(s);
  return s;
}

// Every server a test started must have written only whole JSON lines.
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await s.close();
    assert.deepEqual(s.badLines, [], 'stdout carried only JSON-RPC lines');
    for (const m of s.messages) {
      const items = Array.isArray(m) ? m : [m];
      for (const it of items) assert.equal(it.jsonrpc, '2.0', `jsonrpc 2.0 on ${JSON.stringify(it).slice(0, 120)}`);
    }
  }
});

// The raw line of the response to an id (to check the id's exact spelling).
function rawLineWithId(s, idText) {
  return s.rawLines.find((l) => l.includes(`"id":${idText}`));
}

describe('ids', () => {
  test('string, integer, zero, negative and large integer ids are echoed exactly', async () => {
    const s = start();
    await s.initialize();
    for (const id of ['abc', '', 'ünïcødé-✓', 0, -5, 2 ** 31, 2 ** 53 - 1]) {
      const r = await s.request('ping', undefined, { id });
      assert.deepEqual(r, { jsonrpc: '2.0', id, result: {} }, `id ${JSON.stringify(id)}`);
    }
    // Beyond 2^53 JSON.parse would round, so send and check the raw text.
    for (const big of ['9007199254740993', '9223372036854775807', '18446744073709551615', '-9223372036854775808']) {
      s.write(`{"jsonrpc":"2.0","id":${big},"method":"ping"}`);
      await s.waitFor(() => rawLineWithId(s, big) !== undefined, 3000, `echo of id ${big}`);
      const line = rawLineWithId(s, big);
      assert.match(line, new RegExp(`"id":${big}[,}]`), `id ${big} echoed digit for digit: ${line}`);
      assert.match(line, /"result":\{\}/);
    }
  });

  test('a null, fractional or object id is an invalid request (-32600)', async () => {
    const s = start();
    await s.initialize();
    for (const id of ['null', '1.5', '{"a":1}', 'true']) {
      s.write(`{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
    }
    await s.waitFor(() => s.messages.filter((m) => m.error?.code === -32600).length >= 4, 3000, 'four -32600 errors');
    const r = await s.request('ping', undefined, { id: 'alive' });
    assert.deepEqual(r.result, {});
  });

  test('a response id is the request id even when the request is answered concurrently', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'slow', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 300 } } });
    s.write({ jsonrpc: '2.0', id: 'fast', method: 'tools/call', params: { name: 'test_echo', arguments: { text: 'f' } } });
    const fast = await s.response('fast');
    const slow = await s.response('slow');
    assert.equal(fast.result.structuredContent.text, 'f');
    assert.ok(slow.result.structuredContent.slept_ms >= 290);
    assert.ok(s.messages.indexOf(fast) < s.messages.indexOf(slow), 'the fast call was answered first');
  });
});

describe('bad input gets a JSON-RPC error and the server keeps serving', () => {
  test('malformed JSON → -32700 with id null', async () => {
    const s = start();
    await s.initialize();
    for (const bad of ['{bad json', '{"jsonrpc":"2.0","id":1,', 'nul', '}{']) {
      s.write(bad);
      const e = await s.waitFor((m) => m.error?.code === -32700 && !m.__seen, 3000, `-32700 for ${bad}`);
      e.__seen = true;
      assert.equal(e.id, null);
    }
    assert.deepEqual((await s.request('ping')).result, {});
  });

  test('invalid UTF-8 → -32700, and the error line itself is valid UTF-8 JSON', async () => {
    const s = start();
    await s.initialize();
    s.write(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":"u'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","method":"ping"}')]));
    const e = await s.waitFor((m) => m.error?.code === -32700, 3000, '-32700');
    assert.equal(e.id, null);
    // Overlong encoding and a lone surrogate are invalid too.
    s.write(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":2,"method":"ping","x":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]));
    s.write(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":3,"method":"ping","x":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]));
    await s.waitFor(() => s.messages.filter((m) => m.error?.code === -32700).length >= 3, 3000, 'three -32700');
    assert.ok(!s.messages.some((m) => m.id === 2 || m.id === 3), 'invalid messages are not executed');
    // Valid multi-byte UTF-8 is fine.
    const ok = await s.request('tools/call', { name: 'test_echo', arguments: { text: 'héllo ✓ 🏰' } });
    assert.equal(ok.result.structuredContent.text, 'héllo ✓ 🏰');
  });

  test('non-object messages and a bad jsonrpc field → -32600', async () => {
    const s = start();
    await s.initialize();
    const cases = ['42', '"a string"', 'null', 'true',
      '{"jsonrpc":"1.0","id":"v1","method":"ping"}', '{"id":"nov","method":"ping"}',
      '{"jsonrpc":2.0,"id":"num","method":"ping"}', '{"jsonrpc":"2.0","id":"nometh"}',
      '{"jsonrpc":"2.0","id":"badmeth","method":42}'];
    for (const c of cases) s.write(c);
    await s.waitFor(() => s.messages.filter((m) => m.error?.code === -32600).length >= cases.length, 3000, `${cases.length} x -32600`);
    const errs = s.messages.filter((m) => m.error?.code === -32600);
    // Where the id was readable it is echoed.
    for (const id of ['v1', 'nov', 'num', 'nometh', 'badmeth']) {
      assert.ok(errs.some((m) => m.id === id), `-32600 for id ${id} carries the id`);
    }
    assert.deepEqual((await s.request('ping')).result, {});
  });

  test('a line over --max-message-bytes → -32600, then normal service', async () => {
    const s = start(['--test-fixtures', '--max-message-bytes', '1024']);
    await s.initialize();
    const text = 'x'.repeat(2000);
    s.write({ jsonrpc: '2.0', id: 'big', method: 'tools/call', params: { name: 'test_echo', arguments: { text } } });
    const e = await s.waitFor((m) => m.error?.code === -32600, 3000, '-32600 for the oversized line');
    assert.match(e.error.message, /1024|limit|large|exceed/i);
    assert.ok(!s.messages.some((m) => m.id === 'big' && m.result), 'the oversized request was not executed');
    // A line just under the limit works, and so does one far over it (8 MiB), then service continues.
    const r = await s.request('tools/call', { name: 'test_echo', arguments: { text: 'y'.repeat(900) } });
    assert.equal(r.result.structuredContent.text.length, 900);
    s.write('{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":"' + 'z'.repeat(8 << 20) + '"}}');
    await s.waitFor(() => s.messages.filter((m) => m.error?.code === -32600).length >= 2, 5000, 'second -32600');
    assert.deepEqual((await s.request('ping', undefined, { id: 'after' })).result, {});
  });

  test('unknown method → -32601; a notification never gets a response', async () => {
    const s = start();
    await s.initialize();
    const r = await s.request('no/such/method', {});
    assert.equal(r.error.code, -32601);
    s.notify('notifications/unknown', { x: 1 });
    s.notify('no/such/notification');
    const p = await s.request('ping', undefined, { id: 'p' });
    assert.deepEqual(p.result, {});
    await sleep(100);
    assert.equal(s.messages.length, 3, `only initialize, the -32601 and the ping answered: ${JSON.stringify(s.messages.slice(1))}`);
  });

  test('tools/call errors: unknown tool and missing name → -32602', async () => {
    const s = start();
    await s.initialize();
    const unknown = await s.request('tools/call', { name: 'nope', arguments: {} });
    assert.equal(unknown.error.code, -32602);
    assert.match(unknown.error.message, /nope/);
    const noName = await s.request('tools/call', { arguments: {} });
    assert.equal(noName.error.code, -32602);
    const badCursor = await s.request('tools/list', { cursor: '!!!' });
    assert.equal(badCursor.error.code, -32602);
  });

  test('arguments are validated through $ref into $defs', async () => {
    const s = start();
    await s.initialize();
    const r = await s.request('tools/call', { name: 'json_schema_2020_12_tool', arguments: { address: { street: 5 } } });
    assert.equal(r.result?.isError, true, JSON.stringify(r));
    assert.match(r.result.content[0].text, /street/);
  });
});

describe('legacy lifecycle', () => {
  test('a request before initialize → -32600; ping before initialize is answered', async () => {
    const s = start();
    const ping = await s.request('ping', undefined, { id: 'early-ping' });
    assert.deepEqual(ping.result, {});
    const list = await s.request('tools/list', undefined, { id: 'early-list' });
    assert.equal(list.error?.code, -32600, JSON.stringify(list));
    const call = await s.request('tools/call', { name: 'test_echo', arguments: { text: 'x' } });
    assert.equal(call.error?.code, -32600);
    await s.initialize();
    const ok = await s.request('tools/list');
    assert.ok(ok.result.tools.length > 0);
  });

  test('version negotiation: each supported version is echoed; an unknown one gets 2025-11-25', async () => {
    for (const v of [...LEGACY_VERSIONS, '1999-01-01', '2026-07-28']) {
      const s = start();
      const r = await s.initialize(v);
      const want = LEGACY_VERSIONS.includes(v) ? v : '2025-11-25';
      assert.equal(r.protocolVersion, want, `initialize ${v}`);
      assert.equal(r.serverInfo.name, 'sandcastle');
      assert.ok(r.capabilities.tools);
      await s.close();
    }
  });

  test('a second initialize is rejected', async () => {
    const s = start();
    await s.initialize();
    const again = await s.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } });
    assert.ok(again.error, JSON.stringify(again));
  });

  test('batches are rejected (-32600) unless 2025-03-26 was negotiated', async () => {
    for (const v of ['2024-11-05', '2025-06-18', '2025-11-25']) {
      const s = start();
      await s.initialize(v);
      s.write([{ jsonrpc: '2.0', id: 'b1', method: 'ping' }]);
      const e = await s.waitFor((m) => m.error?.code === -32600, 3000, `batch rejected under ${v}`);
      assert.equal(e.id, null);
      assert.ok(!s.messages.some((m) => m.id === 'b1'), 'batch items not executed');
      await s.close();
    }
  });

  test('under 2025-03-26 a batch is answered with an array (notifications get no entry)', async () => {
    const s = start();
    await s.initialize('2025-03-26');
    s.write([
      { jsonrpc: '2.0', id: 'b1', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/whatever' },
      { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'test_echo', arguments: { text: 'in batch' } } },
      { jsonrpc: '2.0', id: 'b3', method: 'no/such' },
      42,
    ]);
    const arr = await s.waitFor((m) => Array.isArray(m), 3000, 'batch reply');
    const byId = Object.fromEntries(arr.filter((x) => x.id !== null).map((x) => [x.id, x]));
    assert.deepEqual(byId.b1.result, {});
    assert.equal(byId.b2.result.structuredContent.text, 'in batch');
    assert.equal(byId.b3.error.code, -32601);
    assert.ok(arr.some((x) => x.id === null && x.error?.code === -32600), 'the non-object item gets -32600');
    assert.equal(arr.length, 4);
    // An empty batch is an invalid request.
    s.write('[]');
    await s.waitFor((m) => !Array.isArray(m) && m.error?.code === -32600, 3000, 'empty batch -32600');
  });
});

describe('modern era over raw stdio', () => {
  test('server/discover and resultType/serverInfo on every result', async () => {
    const s = start();
    const d = await s.request('server/discover', { _meta: modernMeta() });
    assert.ok(d.result, JSON.stringify(d));
    assert.ok(d.result.supportedVersions.includes(MODERN));
    assert.equal(d.result.resultType, 'complete');
    assert.equal(d.result._meta['io.modelcontextprotocol/serverInfo'].name, 'sandcastle');
    const l = await s.request('tools/list', { _meta: modernMeta() });
    assert.equal(l.result.resultType, 'complete');
    assert.equal(typeof l.result.ttlMs, 'number');
    assert.equal(typeof l.result.cacheScope, 'string');
    const c = await s.request('tools/call', { name: 'test_simple_text', arguments: {}, _meta: modernMeta() });
    assert.equal(c.result.resultType, 'complete');
    assert.equal(c.result._meta['io.modelcontextprotocol/serverInfo'].name, 'sandcastle');
    // Modern requests need no handshake, and logging/setLevel does not exist there.
    const set = await s.request('logging/setLevel', { level: 'info', _meta: modernMeta() });
    assert.equal(set.error?.code, -32601);
  });

  test('logs only with io.modelcontextprotocol/logLevel, and at that level', async () => {
    const s = start();
    await s.request('tools/call', { name: 'test_tool_with_logging', arguments: {}, _meta: modernMeta() });
    assert.equal(s.messages.filter((m) => m.method === 'notifications/message').length, 0);
    await s.request('tools/call', { name: 'test_tool_with_logging', arguments: {}, _meta: modernMeta({ 'io.modelcontextprotocol/logLevel': 'error' }) });
    assert.equal(s.messages.filter((m) => m.method === 'notifications/message').length, 0, 'info logs suppressed at level error');
    await s.request('tools/call', { name: 'test_tool_with_logging', arguments: {}, _meta: modernMeta({ 'io.modelcontextprotocol/logLevel': 'debug' }) });
    const logs = s.messages.filter((m) => m.method === 'notifications/message');
    assert.equal(logs.length, 3);
  });
});

describe('cancellation and concurrency (raw)', () => {
  test('notifications/cancelled stops the handler and no response is ever sent for it', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'c1', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 10000 }, _meta: { progressToken: 'tok' } } });
    await s.waitFor((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok', 3000, 'first progress');
    s.notify('notifications/cancelled', { requestId: 'c1', reason: 'test' });
    const t0 = performance.now();
    assert.deepEqual((await s.request('ping', undefined, { id: 'p' })).result, {});
    await sleep(400);
    assert.ok(!s.messages.some((m) => m.id === 'c1'), 'no response for the cancelled request');
    const progressCount = s.messages.filter((m) => m.params?.progressToken === 'tok').length;
    await sleep(300);
    assert.equal(s.messages.filter((m) => m.params?.progressToken === 'tok').length, progressCount, 'progress stopped');
    // The id is free again: reusing it works.
    const again = await s.request('tools/call', { name: 'test_echo', arguments: { text: 'reuse' } }, { id: 'c1' });
    assert.equal(again.result.structuredContent.text, 'reuse');
    assert.ok(performance.now() - t0 < 2000);
    // Cancelling an unknown or finished id is harmless.
    s.notify('notifications/cancelled', { requestId: 'never-sent' });
    assert.deepEqual((await s.request('ping')).result, {});
  });

  test('a long call does not delay ping (< 500 ms round trip while it runs)', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 3000 } } });
    await sleep(100);
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      await s.request('ping');
      const rtt = performance.now() - t0;
      assert.ok(rtt < 500, `ping took ${rtt.toFixed(1)} ms`);
    }
    s.notify('notifications/cancelled', { requestId: 'long' });
  });

  test('several slow calls run in parallel', async () => {
    const s = start();
    await s.initialize();
    const t0 = performance.now();
    const ids = ['a', 'b', 'c', 'd'];
    for (const id of ids) s.write({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 500 } } });
    for (const id of ids) await s.response(id);
    const took = performance.now() - t0;
    assert.ok(took < 1200, `4 x 500 ms calls took ${took.toFixed(0)} ms`);
  });
});

describe('framing and shutdown', () => {
  test('an unterminated last line at EOF is handled', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'last', method: 'ping' }, { newline: false });
    s.closeStdin();
    const r = await s.response('last', 3000);
    assert.deepEqual(r.result, {});
    const { code } = await s.exited;
    assert.equal(code, 0);
  });

  test('CRLF line endings and blank lines are tolerated', async () => {
    const s = start();
    s.write('');
    s.write('{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r');
    const r = await s.response('crlf');
    assert.deepEqual(r.result, {});
  });

  test('several messages in one write and one message split across writes', async () => {
    const s = start();
    await s.initialize();
    s.write('{"jsonrpc":"2.0","id":1001,"method":"ping"}\n{"jsonrpc":"2.0","id":1002,"method":"ping"}');
    const line = '{"jsonrpc":"2.0","id":1003,"method":"ping"}';
    s.write(line.slice(0, 10), { newline: false });
    await sleep(50);
    s.write(line.slice(10));
    await Promise.all([s.response(1001), s.response(1002), s.response(1003)]);
  });

  test('stdin close → exit 0 within 2 s even with a 60 s call running', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'forever', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 60000 } } });
    await sleep(150);
    const t0 = performance.now();
    s.closeStdin();
    const { code, signal, at } = await s.exited;
    assert.equal(signal, null);
    assert.equal(code, 0);
    assert.ok(at - t0 < 2000, `exited after ${(at - t0).toFixed(0)} ms`);
  });

  test('stdin close lets a short in-flight call finish and answer', async () => {
    const s = start();
    await s.initialize();
    s.write({ jsonrpc: '2.0', id: 'short', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 300 } } });
    await sleep(50);
    s.closeStdin();
    const { code } = await s.exited;
    assert.equal(code, 0);
    const r = s.messages.find((m) => m.id === 'short');
    assert.ok(r?.result, 'the in-flight call was answered before exit');
    assert.ok(r.result.structuredContent.slept_ms >= 290);
  });

  test('a batch read just before EOF is still answered', async () => {
    // The loss is a race, so try a few times.
    for (let i = 0; i < 5; i++) {
      const s = start();
      await s.initialize('2025-03-26');
      s.proc.stdin.end(`${JSON.stringify([{ jsonrpc: '2.0', id: 'eof-batch', method: 'ping' }])}\n`);
      await s.exited;
      assert.ok(s.messages.some((m) => Array.isArray(m) && m[0]?.id === 'eof-batch'), `batch answered (attempt ${i + 1})`);
    }
  });

  for (const sig of ['SIGTERM', 'SIGINT']) {
    test(`${sig} → exit 0 within 2 s with a call running`, async () => {
      const s = start();
      await s.initialize();
      s.write({ jsonrpc: '2.0', id: 'running', method: 'tools/call', params: { name: 'test_sleep', arguments: { ms: 60000 } } });
      await sleep(150);
      const t0 = performance.now();
      s.proc.kill(sig);
      const { code, signal, at } = await s.exited;
      assert.equal(signal, null, `exited by itself, not killed by ${signal}`);
      assert.equal(code, 0);
      assert.ok(at - t0 < 2000, `exited after ${(at - t0).toFixed(0)} ms`);
    });
  }

  test('stderr carries the logs; stdout stays JSON even with --log-level trace', async () => {
    const s = start(['--test-fixtures', '--log-level', 'trace']);
    await s.initialize();
    await s.request('tools/call', { name: 'test_tool_with_logging', arguments: {} });
    s.write('{broken');
    await s.waitFor((m) => m.error?.code === -32700);
    await s.close();
    assert.ok(s.stderr.length > 0, 'logs went to stderr');
    assert.deepEqual(s.badLines, []);
  });
});

describe('nested JSON never takes the server down', () => {
  const N = 100000;
  const deepArr = '['.repeat(N) + ']'.repeat(N);
  const deepObj = '{"a":'.repeat(N) + '1' + '}'.repeat(N);

  // Each of these once overflowed a stack (a copy or walk recursing 100k
  // deep) or reached the tools; now one bounded parser refuses them all.
  test('100k-deep arrays and objects on a line → -32600 naming the depth limit; the server keeps serving', async () => {
    const s = start();
    await s.initialize();
    const lines = [
      [deepArr, null], [deepObj, null], ['['.repeat(N), null], [deepObj.slice(0, -N), null],
      [`{"jsonrpc":"2.0","id":"deep-params","method":"ping","params":{"x":${deepArr}}}`, 'deep-params'],
      [`{"jsonrpc":"2.0","id":"deep-args","method":"tools/call","params":{"name":"test_echo","arguments":{"text":"a","x":${deepObj}}}}`, 'deep-args'],
      [`{"jsonrpc":"2.0","method":"tools/call","params":{"x":${deepObj}},"id":77}`, 77],
    ];
    for (const [i, [line, id]] of lines.entries()) {
      s.write(line);
      const e = await s.waitFor((m) => m.error?.code === -32600 && !m.__seen, 5000, `-32600 for line ${i}`);
      e.__seen = true;
      assert.match(e.error.message, /deeper than the limit of 128 levels/);
      assert.equal(e.id, id, 'the id is recovered where it can be');
      const r = await s.request('ping', undefined, { id: `alive-${i}` });
      assert.deepEqual(r.result, {}, `still serving after line ${i}`);
    }
    const wide = `{"jsonrpc":"2.0","id":"wide","method":"ping","params":{"x":[${'0,'.repeat(300000)}0]}}`;
    s.write(wide);
    const w = await s.response('wide');
    assert.equal(w.error.code, -32600);
    assert.match(w.error.message, /more than the limit of 262144 values/);
    const echo = await s.request('tools/call', { name: 'test_echo', arguments: { text: 'ok' } });
    assert.equal(echo.result.structuredContent.text, 'ok');
  });

  // Sandbox code can write anything to its kernel's channel (fd 3 of the
  // driver it runs in). A frame nested 100k deep reached the server's walkers.
  test('a kernel frame nested 100k deep → that call fails with the malformed-frame error; the sandbox and server go on', async () => {
    const s = start([]);
    await s.initialize();
    const created = await s.request('tools/call', { name: 'create_sandbox', arguments: { language: 'python' } }, { timeoutMs: 30000 });
    const id = created.result.structuredContent.sandbox_id;
    const run = (code) => s.request('tools/call', { name: 'execute_code', arguments: { sandbox_id: id, code } }, { timeoutMs: 30000 });
    assert.equal((await run('kept = 41\nkept + 1')).result.structuredContent.result['text/plain'], '42');
    const evil = [
      'import os, sys',
      'cid = sys.stdout.kernel.cell_id.encode()',
      `body = b'{"type":"display","id":"' + cid + b'","data":{"a":' + b'[' * ${N} + b']' * ${N} + b'}}'`,
      "os.write(3, len(body).to_bytes(4, 'big') + body)",
      'import time',
      'time.sleep(5)',
    ].join('\n');
    const bad = await run(evil);
    assert.equal(bad.result.isError, true, JSON.stringify(bad).slice(0, 400));
    assert.match(bad.result.content[0].text, /the python kernel sent a malformed frame: .*deeper than the limit of 128 levels/);
    const after = await run("'kept' in globals()");
    assert.equal(after.result.structuredContent.result['text/plain'], 'False', 'a fresh kernel answers');
    assert.deepEqual((await s.request('ping')).result, {});
  });
});
