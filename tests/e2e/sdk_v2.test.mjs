// The official TypeScript SDK v2 client (@modelcontextprotocol/client) in the
// modern era (2026-07-28): no handshake, server/discover, per-request _meta.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { BIN, binFor, FIXTURE_CALLS, FIXTURE_TOOLS, MODERN, RawServer, checkFixtureResult, modernMeta, sleep } from './lib/harness.mjs';
import { tap } from './lib/tap.mjs';

async function connect({ args = ['--test-fixtures'], capabilities = {} } = {}) {
  const transport = new StdioClientTransport({ command: binFor(args), args, stderr: 'pipe' });
  const wire = tap(transport);
  const client = new Client({ name: 'sandcastle-e2e-v2', version: '1.0.0' }, {
    versionNegotiation: { mode: { pin: MODERN } },
    capabilities,
  });
  await client.connect(transport);
  return { client, transport, wire };
}

const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo';

describe('SDK v2 client (modern era 2026-07-28)', () => {
  let c;
  before(async () => { c = await connect(); });
  after(async () => { await c?.client.close(); });

  test('connects in the modern era via server/discover', () => {
    assert.equal(c.client.getProtocolEra(), 'modern');
    assert.equal(c.client.getNegotiatedProtocolVersion(), MODERN);
    assert.equal(c.client.getServerVersion()?.name, 'sandcastle');
    const d = c.client.getDiscoverResult();
    assert.ok(d.supportedVersions.includes(MODERN), `supportedVersions ${d.supportedVersions}`);
    assert.ok(d.capabilities.tools, 'discover declares tools');
    assert.equal(d.resultType, 'complete');
    assert.equal(d._meta[SERVER_INFO_KEY].name, 'sandcastle');
    // No legacy handshake on the session.
    assert.ok(!c.wire.out.some((m) => m.method === 'initialize'), 'no initialize sent');
  });

  test('tools/list: every fixture, with ttlMs, cacheScope, resultType and serverInfo on the wire', async () => {
    const { tools } = await c.client.listTools(undefined, { cacheMode: 'refresh' });
    const names = tools.map((t) => t.name);
    for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} listed`);
    const req = c.wire.out.findLast((m) => m.method === 'tools/list');
    assert.equal(req.params._meta['io.modelcontextprotocol/protocolVersion'], MODERN, 'SDK sent the modern envelope');
    const res = c.wire.in.find((m) => m.id === req.id);
    assert.equal(res.result.resultType, 'complete');
    assert.equal(typeof res.result.ttlMs, 'number');
    assert.ok(['public', 'private'].includes(res.result.cacheScope), `cacheScope ${res.result.cacheScope}`);
    assert.equal(res.result._meta[SERVER_INFO_KEY].name, 'sandcastle');
  });

  for (const name of Object.keys(FIXTURE_CALLS).filter((n) => n !== 'test_needs_sampling')) {
    test(`tools/call ${name}`, async () => {
      const r = await c.client.callTool({ name, arguments: FIXTURE_CALLS[name].args });
      checkFixtureResult(assert, name, r);
      const req = c.wire.out.findLast((m) => m.method === 'tools/call' && m.params.name === name);
      const res = c.wire.in.find((m) => m.id === req.id);
      assert.equal(res.result.resultType, 'complete', 'resultType on the wire');
      assert.equal(res.result._meta[SERVER_INFO_KEY].name, 'sandcastle', 'serverInfo on the wire');
    });
  }

  test('structuredContent and the same JSON as a text block', async () => {
    const r = await c.client.callTool({ name: 'test_echo', arguments: { text: 'modern', count: 2 } });
    assert.deepEqual(r.structuredContent, { text: 'modern', count: 2 });
    assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  });

  test('progress notifications: increasing, all before the response', async () => {
    const seen = [];
    await c.client.callTool({ name: 'test_sleep', arguments: { ms: 350 } }, { onprogress: (p) => seen.push(p.progress) });
    assert.ok(seen.length >= 2, `onprogress called ${seen.length} times`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `progress ${seen}`);
    // The SDK may drop a notification sharing a read with the response; the wire has all.
    const req = c.wire.out.findLast((m) => m.params?.name === 'test_sleep' && m.params.arguments.ms === 350);
    const token = req.params._meta.progressToken;
    assert.notEqual(token, undefined, 'SDK sent a progressToken');
    const resAt = c.wire.in.findIndex((m) => m.id === req.id);
    const notes = c.wire.in.map((m, i) => ({ m, i }))
      .filter(({ m }) => m.method === 'notifications/progress' && m.params.progressToken === token);
    assert.deepEqual(notes.map(({ m }) => m.params.progress), [100, 200, 300, 350]);
    assert.ok(notes.every(({ i }) => i < resAt));
  });

  test('logging: only when the request asks with io.modelcontextprotocol/logLevel', async () => {
    const logs = [];
    c.client.setNotificationHandler('notifications/message', (n) => { logs.push(n.params); });
    await c.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    await sleep(50);
    assert.equal(logs.length, 0, `no logs without logLevel: ${JSON.stringify(logs)}`);
    await c.client.callTool({
      name: 'test_tool_with_logging', arguments: {},
      _meta: { 'io.modelcontextprotocol/logLevel': 'info' },
    });
    await sleep(50);
    assert.equal(logs.length, 3, `logs: ${JSON.stringify(logs)}`);
    assert.ok(logs.every((l) => l.level === 'info'));
  });

  test('invalid arguments give an isError result naming the field', async () => {
    for (const [args, field] of [[{}, /text/], [{ text: 'x', count: 'many' }, /count/], [{ text: 'x', mode: 'loud' }, /mode/]]) {
      const r = await c.client.callTool({ name: 'test_echo', arguments: args });
      assert.equal(r.isError, true);
      assert.match(r.content[0].text, field);
    }
  });

  test('test_needs_sampling without the sampling capability → -32021', async () => {
    await assert.rejects(
      c.client.callTool({ name: 'test_needs_sampling', arguments: {} }),
      (e) => {
        assert.equal(e.code, -32021);
        assert.deepEqual(e.data?.requiredCapabilities, { sampling: {} });
        return true;
      },
    );
  });

  test('cancellation: abort stops the call, no response is sent, the server keeps serving', async () => {
    const ac = new AbortController();
    const t0 = performance.now();
    const call = c.client.callTool({ name: 'test_sleep', arguments: { ms: 10000 } }, { signal: ac.signal });
    await sleep(200);
    ac.abort('test cancels');
    await assert.rejects(call);
    assert.ok(performance.now() - t0 < 1000, 'rejects fast');
    const req = c.wire.out.findLast((m) => m.params?.name === 'test_sleep' && m.params.arguments.ms === 10000);
    assert.ok(c.wire.out.some((m) => m.method === 'notifications/cancelled' && m.params.requestId === req.id), 'cancel sent');
    const r = await c.client.callTool({ name: 'test_echo', arguments: { text: 'still here' } });
    assert.equal(r.structuredContent.text, 'still here');
    await sleep(300);
    assert.equal(c.wire.in.filter((m) => m.id === req.id).length, 0, 'no response for the cancelled request');
  });

  test('concurrency: a slow call does not delay another', async () => {
    const slow = c.client.callTool({ name: 'test_sleep', arguments: { ms: 1500 } });
    await sleep(100);
    const t0 = performance.now();
    await c.client.callTool({ name: 'test_echo', arguments: { text: 'fast' } });
    assert.ok(performance.now() - t0 < 500, 'not queued behind the sleep');
    assert.ok((await slow).structuredContent.slept_ms >= 1400);
  });
});

describe('SDK v2 client: capabilities and versions', () => {
  test('test_needs_sampling succeeds when the client declares sampling', async () => {
    const { client, wire } = await connect({ capabilities: { sampling: {} } });
    try {
      const r = await client.callTool({ name: 'test_needs_sampling', arguments: {} });
      checkFixtureResult(assert, 'test_needs_sampling', r);
      const req = wire.out.findLast((m) => m.method === 'tools/call');
      assert.deepEqual(req.params._meta['io.modelcontextprotocol/clientCapabilities'].sampling, {});
    } finally {
      await client.close();
    }
  });

  test('pagination with --page-size 3: the SDK walks every page and reaches every fixture', async () => {
    const { client, wire } = await connect({ args: ['--test-fixtures', '--page-size', '3'] });
    try {
      // No cursor: the v2 SDK walks the pages itself and aggregates.
      const all = await client.listTools();
      const names = all.tools.map((t) => t.name);
      for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} reached`);
      assert.equal(new Set(names).size, names.length, 'no duplicates');
      const pages = wire.out.filter((m) => m.method === 'tools/list')
        .map((req) => ({ req, res: wire.in.find((m) => m.id === req.id) }));
      assert.equal(pages.length, Math.ceil(names.length / 3), 'one request per page');
      assert.deepEqual(pages.flatMap((p) => p.res.result.tools.map((t) => t.name)), names, 'pages concatenate to the aggregate');
      // The same set as one unpaginated listing from a default server.
      const whole = await connect();
      try {
        const { tools } = await whole.client.listTools();
        assert.deepEqual(names, tools.map((t) => t.name));
      } finally {
        await whole.client.close();
      }
      for (const [i, { req, res }] of pages.entries()) {
        assert.ok(res.result.tools.length <= 3, `page ${i} has ${res.result.tools.length}`);
        assert.equal(req.params?.cursor, i ? pages[i - 1].res.result.nextCursor : undefined, 'cursor chaining');
      }
      assert.equal(pages.at(-1).res.result.nextCursor, undefined, 'last page has no nextCursor');
      // An explicit cursor fetches one raw page.
      const second = await client.listTools({ cursor: pages[0].res.result.nextCursor });
      assert.deepEqual(second.tools.map((t) => t.name), pages[1].res.result.tools.map((t) => t.name));
      await assert.rejects(client.listTools({ cursor: 'bogus' }), (e) => e.code === -32602);
    } finally {
      await client.close();
    }
  });

  test('unsupported protocol version → -32022 with supported and requested (raw request)', async () => {
    const s = new RawServer();
    try {
      const r = await s.request('tools/list', {
        _meta: modernMeta({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }),
      });
      assert.equal(r.error?.code, -32022, JSON.stringify(r));
      assert.equal(r.error.data.requested, '2099-01-01');
      assert.ok(r.error.data.supported.includes(MODERN), JSON.stringify(r.error.data));
      // A well-formed modern request on the same connection still works.
      const ok = await s.request('tools/list', { _meta: modernMeta() });
      assert.equal(ok.result.resultType, 'complete');
      // Missing clientCapabilities → -32602.
      const meta = modernMeta();
      delete meta['io.modelcontextprotocol/clientCapabilities'];
      const bad = await s.request('tools/list', { _meta: meta });
      assert.equal(bad.error?.code, -32602, JSON.stringify(bad));
      // ping is not a modern-era method.
      const ping = await s.request('ping', { _meta: modernMeta() });
      assert.equal(ping.error?.code, -32601, JSON.stringify(ping));
      // test_needs_sampling over the raw wire: -32021 names the capability.
      const need = await s.request('tools/call', { name: 'test_needs_sampling', arguments: {}, _meta: modernMeta() });
      assert.equal(need.error?.code, -32021);
      assert.deepEqual(need.error.data.requiredCapabilities, { sampling: {} });
    } finally {
      await s.close();
    }
  });
});
