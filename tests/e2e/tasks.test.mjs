// Tasks with a real client: the TypeScript SDK 1.32.2 (its experimental
// 2025-11-25 tasks API, client.experimental.tasks) over Streamable HTTP with
// two API keys. A 20 s computation runs as a task while the client polls it,
// reads its live log output, starts and cancels another task, and checks that
// neither key sees the other's tasks. The 2026-07-28 extension (SEP-2663) is
// covered by the official conformance suite (conformance.test.mjs).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { keys, startHttp, tempStateDir } from './lib/http.mjs';

const RELATED = 'io.modelcontextprotocol/related-task';

async function connect(url, key) {
  const client = new Client({ name: 'sandcastle-e2e-tasks', version: '1.0.0' });
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  await client.connect(new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await client.listTools();  // the SDK learns which tools take tasks (execution.taskSupport)
  return { client, logs };
}

// Starts `args` as a task; resolves with the created task and a promise of
// every stream message.
async function startTask(client, name, args) {
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema,
    { task: { ttl: 120000 } });
  const first = await stream.next();
  assert.equal(first.value?.type, 'taskCreated', JSON.stringify(first.value));
  const rest = (async () => {
    const msgs = [];
    for await (const m of stream) msgs.push(m);
    return msgs;
  })();
  return { task: first.value.task, rest };
}

async function waitFor(fn, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('tasks over HTTP with the TypeScript SDK (2025-11-25 tasks)', () => {
  let state, srv, a, b;
  before(async () => {
    state = tempStateDir();
    const keyA = JSON.parse(keys(state, '--json', 'create', '--name', 'alice')).key;
    const keyB = JSON.parse(keys(state, '--json', 'create', '--name', 'bob')).key;
    srv = await startHttp(['--test-fixtures', '--auth', '--pool-size', '0'], { stateDir: state });
    a = await connect(srv.url, keyA);
    b = await connect(srv.url, keyB);
  });
  after(async () => {
    await a?.client.close();
    await b?.client.close();
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('the server offers tasks and lists which tools take them', async () => {
    const caps = a.client.getServerCapabilities();
    assert.ok(caps.tasks?.requests?.tools?.call, JSON.stringify(caps));
    assert.ok(caps.tasks.list && caps.tasks.cancel);
    const { tools } = await a.client.listTools();
    const by = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.equal(by.slow_compute.execution?.taskSupport, 'optional');
    assert.equal(by.failing_job.execution?.taskSupport, 'required');
    assert.equal(by.greet.execution, undefined);
  });

  test('a 20 s computation runs as a task: polled, streamed, cancelled neighbour, result read', { timeout: 40000 }, async () => {
    await a.client.setLoggingLevel('info');
    const started = Date.now();
    const long = await startTask(a.client, 'slow_compute', { seconds: 20, label: 'long' });
    assert.equal(long.task.status, 'working');
    assert.ok(Date.now() - started < 5000, 'the call returned at once');
    assert.ok(long.task.ttl > 0 && long.task.ttl <= 120000, `ttl ${long.task.ttl}`);

    // Another task, cancelled while it runs: tasks/cancel answers with the
    // cancelled task, and its result says it was cancelled.
    const doomed = await startTask(a.client, 'slow_compute', { seconds: 60, label: 'doomed' });
    const cancelled = await a.client.experimental.tasks.cancelTask(doomed.task.taskId);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await a.client.experimental.tasks.getTask(doomed.task.taskId)).status, 'cancelled');
    const doomedMsgs = await doomed.rest;
    assert.ok(doomedMsgs.some((m) => m.type === 'error' && /cancelled/.test(m.error.message)), JSON.stringify(doomedMsgs));
    // Cancelling a finished task is an error (-32602), as 2025-11-25 says.
    await assert.rejects(a.client.experimental.tasks.cancelTask(doomed.task.taskId), (e) => e.code === -32602);

    // Live output while the long task runs: log messages tagged with the task.
    await waitFor(() => a.logs.some((l) => l._meta?.[RELATED]?.taskId === long.task.taskId && /long: 2 s/.test(l.data)),
      'the long task\'s log output');
    const mid = await a.client.experimental.tasks.getTask(long.task.taskId);
    assert.equal(mid.status, 'working');

    // Isolation: bob sees none of alice's tasks and cannot read or cancel them.
    const mine = (await a.client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
    assert.ok(mine.includes(long.task.taskId) && mine.includes(doomed.task.taskId), JSON.stringify(mine));
    const theirs = (await b.client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
    assert.ok(!theirs.includes(long.task.taskId) && !theirs.includes(doomed.task.taskId), JSON.stringify(theirs));
    await assert.rejects(b.client.experimental.tasks.getTask(long.task.taskId), (e) => e.code === -32602);
    await assert.rejects(b.client.experimental.tasks.cancelTask(long.task.taskId), (e) => e.code === -32602);
    assert.equal((await a.client.experimental.tasks.getTask(long.task.taskId)).status, 'working');

    const msgs = await long.rest;
    const statuses = msgs.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
    assert.ok(statuses.filter((s) => s === 'working').length >= 2, `polled: ${statuses}`);
    assert.equal(statuses.at(-1), 'completed');
    const result = msgs.find((m) => m.type === 'result')?.result;
    assert.match(result?.content?.[0]?.text ?? '', /long: computed after 20/);
    assert.ok(Date.now() - started >= 20000);
    // The result stays readable (tasks/result) until the TTL.
    const again = await a.client.experimental.tasks.getTaskResult(long.task.taskId, CallToolResultSchema);
    assert.match(again.content[0].text, /long: computed/);
  });

  test('a tool error completes the task with isError; a task-only tool without a task is refused', async () => {
    const job = await startTask(a.client, 'failing_job', {});
    const msgs = await job.rest;
    const result = msgs.find((m) => m.type === 'result')?.result;
    assert.equal(result?.isError, true, JSON.stringify(msgs));
    await assert.rejects(a.client.request({ method: 'tools/call', params: { name: 'failing_job', arguments: {} } },
      CallToolResultSchema), (e) => e.code === -32601);
  });

  test('an unknown task id is -32602', async () => {
    await assert.rejects(a.client.experimental.tasks.getTask('no-such-task'), (e) => e.code === -32602);
  });
});
