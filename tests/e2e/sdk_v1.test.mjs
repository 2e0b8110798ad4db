// The official TypeScript SDK v1 client (@modelcontextprotocol/sdk), legacy
// era, spawning sandcastle over stdio.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { BIN, binFor, FIXTURE_CALLS, FIXTURE_TOOLS, checkFixtureResult, sleep } from './lib/harness.mjs';
import { exchange, tap } from './lib/tap.mjs';

async function connect(args = ['--test-fixtures']) {
  const transport = new StdioClientTransport({ command: binFor(args), args, stderr: 'pipe' });
  const wire = tap(transport);
  const client = new Client({ name: 'sandcastle-e2e-v1', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport, wire };
}

describe('SDK v1 client (legacy era)', () => {
  let c;
  before(async () => { c = await connect(); });
  after(async () => { await c?.client.close(); });

  test('initialize negotiates the SDK version and reports serverInfo', async () => {
    const { req, res } = exchange(c.wire, 'initialize');
    assert.ok(req, 'initialize was sent');
    assert.ok(res?.result, `initialize answered: ${JSON.stringify(res)}`);
    assert.equal(res.result.protocolVersion, req.params.protocolVersion, 'echoes the version the SDK asked for');
    assert.equal(c.client.getServerVersion().name, 'sandcastle');
    assert.match(c.client.getServerVersion().version, /^\d+\.\d+\.\d+/);
    const caps = c.client.getServerCapabilities();
    assert.ok(caps.tools, 'declares tools');
    assert.ok(caps.logging, 'declares logging');
    // resources: sandbox:// files (resources/read, resources/templates/list).
    assert.ok(caps.resources, 'declares resources');
    // Declared only what is implemented: every declared feature answers.
    assert.deepEqual(Object.keys(caps).filter((k) => !['tools', 'logging', 'resources', 'prompts', 'completions', 'tasks'].includes(k)), []);
    if (caps.resources) await c.client.listResourceTemplates();
    if (caps.prompts) await c.client.listPrompts();
    // tasks (2025-11-25): tool calls may run as tasks, and tasks/list answers.
    if (caps.tasks) {
      assert.ok(caps.tasks.requests?.tools?.call, 'tasks declares task-augmented tools/call');
      assert.ok(Array.isArray((await c.client.experimental.tasks.listTasks()).tasks), 'tasks/list answers');
    }
  });

  test('tools/list has every fixture with a schema', async () => {
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} listed`);
    for (const t of tools) assert.equal(t.inputSchema.type, 'object', `${t.name} inputSchema`);
    const echo = tools.find((t) => t.name === 'test_echo');
    assert.deepEqual(echo.inputSchema.required, ['text']);
    assert.ok(echo.outputSchema, 'test_echo has an outputSchema');
  });

  test('ping', async () => {
    assert.deepEqual(await c.client.ping(), {});
  });

  for (const name of Object.keys(FIXTURE_CALLS)) {
    test(`tools/call ${name}`, async () => {
      const r = await c.client.callTool({ name, arguments: FIXTURE_CALLS[name].args });
      checkFixtureResult(assert, name, r);
    });
  }

  // On the wire, every progress notification precedes the response. The v1
  // SDK dispatches notifications a microtask late but responses at once, so a
  // notification that shares a read chunk with the response (the final 100)
  // can reach onprogress after the handler is gone: onprogress is checked for
  // order, the wire for completeness.
  function wireProgress(req) {
    const token = req.params._meta.progressToken;
    const resAt = c.wire.in.findIndex((m) => m.id === req.id && 'result' in m);
    const notes = c.wire.in
      .map((m, i) => ({ m, i }))
      .filter(({ m }) => m.method === 'notifications/progress' && m.params.progressToken === token);
    assert.ok(resAt >= 0, 'response received');
    assert.ok(notes.every(({ i }) => i < resAt), 'all progress precedes the response');
    return notes.map(({ m }) => m.params);
  }

  test('progress notifications arrive in increasing order', async () => {
    const seen = [];
    const r = await c.client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: (p) => seen.push(p),
    });
    assert.equal(r.isError, undefined);
    assert.ok(seen.length >= 2, `onprogress called ${seen.length} times`);
    assert.deepEqual(seen.map((p) => p.progress), [0, 50, 100].slice(0, seen.length));
    assert.ok(seen.every((p) => p.total === 100));
    const req = c.wire.out.findLast((m) => m.params?.name === 'test_tool_with_progress');
    const onWire = wireProgress(req);
    assert.deepEqual(onWire.map((p) => p.progress), [0, 50, 100]);
    assert.deepEqual(onWire.map((p) => p.message), ['started', 'halfway', 'done']);
  });

  test('test_sleep progress is strictly increasing', async () => {
    const seen = [];
    await c.client.callTool({ name: 'test_sleep', arguments: { ms: 450 } }, undefined, { onprogress: (p) => seen.push(p.progress) });
    assert.ok(seen.length >= 3, `got ${seen.length} progress notifications`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `progress ${seen}`);
    const req = c.wire.out.findLast((m) => m.params?.name === 'test_sleep' && m.params.arguments.ms === 450);
    const onWire = wireProgress(req).map((p) => p.progress);
    assert.deepEqual(onWire, [100, 200, 300, 400, 450]);
  });

  test('logging/setLevel then a logging tool sends notifications/message', async () => {
    const logs = [];
    c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
    await c.client.setLoggingLevel('info');
    await c.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    await sleep(50);
    const texts = logs.map((l) => (typeof l.data === 'string' ? l.data : JSON.stringify(l.data)));
    assert.equal(logs.length, 3, `logs: ${JSON.stringify(logs)}`);
    assert.ok(logs.every((l) => l.level === 'info'));
    assert.match(texts[0], /started/);
    assert.match(texts[2], /completed/);
    // Raising the level above info silences them.
    logs.length = 0;
    await c.client.setLoggingLevel('error');
    await c.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    await sleep(50);
    assert.equal(logs.length, 0, `no info logs at level error: ${JSON.stringify(logs)}`);
  });

  test('invalid arguments give an isError result naming the field', async () => {
    const cases = [
      [{}, /text/],
      [{ text: 42 }, /text/],
      [{ text: 'x', count: 0 }, /count/],
      [{ text: 'x', mode: 'shout' }, /mode/],
      [{ text: 'x'.repeat(1001) }, /text/],
      [{ text: 'x', extra: 1 }, /extra/],
    ];
    for (const [args, field] of cases) {
      const r = await c.client.callTool({ name: 'test_echo', arguments: args });
      assert.equal(r.isError, true, `isError for ${JSON.stringify(args).slice(0, 60)}`);
      assert.match(r.content[0].text, field, `names the field for ${JSON.stringify(args).slice(0, 60)}`);
    }
    const r = await c.client.callTool({ name: 'test_sleep', arguments: { ms: 'soon' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /ms/);
  });

  test('cancellation: an aborted 10 s call rejects fast, no response is sent, the server keeps serving', async () => {
    const ac = new AbortController();
    const t0 = performance.now();
    const call = c.client.callTool({ name: 'test_sleep', arguments: { ms: 10000 } }, undefined, { signal: ac.signal });
    await sleep(200);
    ac.abort('test cancels');
    await assert.rejects(call);
    assert.ok(performance.now() - t0 < 1000, 'rejects well before the 10 s sleep ends');
    const req = c.wire.out.findLast((m) => m.params?.name === 'test_sleep' && m.params?.arguments?.ms === 10000);
    const cancel = c.wire.out.find((m) => m.method === 'notifications/cancelled' && m.params.requestId === req.id);
    assert.ok(cancel, 'the SDK sent notifications/cancelled');
    // The server still answers promptly afterwards...
    const p0 = performance.now();
    await c.client.ping();
    const r = await c.client.callTool({ name: 'test_echo', arguments: { text: 'after' } });
    assert.deepEqual(r.structuredContent, { text: 'after', count: 1 });
    assert.ok(performance.now() - p0 < 500);
    // ...and never answers the cancelled id (give a stopped handler time to misbehave).
    await sleep(300);
    assert.equal(c.wire.in.filter((m) => m.id === req.id).length, 0, 'no response for the cancelled request');
  });

  test('concurrency: a 3 s call does not delay ping or another call', async () => {
    const t0 = performance.now();
    const slow = c.client.callTool({ name: 'test_sleep', arguments: { ms: 3000 } });
    await sleep(100);
    for (let i = 0; i < 5; i++) {
      const p0 = performance.now();
      await c.client.ping();
      const rtt = performance.now() - p0;
      assert.ok(rtt < 500, `ping round trip ${rtt.toFixed(1)} ms while a call runs`);
    }
    const e0 = performance.now();
    await c.client.callTool({ name: 'test_echo', arguments: { text: 'meanwhile' } });
    assert.ok(performance.now() - e0 < 500, 'another call is not queued behind the sleep');
    const r = await slow;
    const total = performance.now() - t0;
    assert.ok(r.structuredContent.slept_ms >= 2900, `slept ${r.structuredContent.slept_ms}`);
    assert.ok(total >= 2900 && total < 4500, `slow call took ${total.toFixed(0)} ms`);
  });
});

describe('SDK v1 client: pagination and the default tool list', () => {
  test('--page-size 3: walking every page reaches the same set', async () => {
    const { client, wire } = await connect(['--test-fixtures', '--page-size', '3']);
    try {
      const names = [];
      let cursor;
      let pages = 0;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        assert.ok(page.tools.length <= 3, `page of ${page.tools.length}`);
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
        pages++;
        assert.ok(pages < 50, 'pagination terminates');
      } while (cursor);
      assert.equal(pages, Math.ceil(names.length / 3), 'full pages until the last');
      assert.equal(new Set(names).size, names.length, 'no tool repeated across pages');
      for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} reached`);
      // The same set, in the same order, as one unpaginated listing.
      const whole = await connect();
      try {
        const { tools } = await whole.client.listTools();
        assert.deepEqual(names, tools.map((t) => t.name));
      } finally {
        await whole.client.close();
      }
      // A bad cursor is an error, not an empty page.
      await assert.rejects(client.listTools({ cursor: 'not-a-real-cursor' }), (e) => e.code === -32602);
      assert.ok(wire.in.some((m) => m.error?.code === -32602));
    } finally {
      await client.close();
    }
  });

  test('default server (no --test-fixtures) lists no test tools', async () => {
    const { client } = await connect([]);
    try {
      const { tools } = await client.listTools();
      const fixtures = tools.filter((t) => FIXTURE_TOOLS.includes(t.name) || t.name.startsWith('test_'));
      assert.deepEqual(fixtures.map((t) => t.name), []);
      const r = await client.callTool({ name: 'test_simple_text', arguments: {} }).catch((e) => e);
      // Either a protocol error or an isError result: the fixture must not run.
      if (r instanceof Error) assert.match(String(r.message), /test_simple_text|unknown|not found/i);
      else assert.equal(r.isError, true);
    } finally {
      await client.close();
    }
  });
});
