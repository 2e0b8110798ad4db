// Tasks with a real client: the TypeScript SDK 1.32.2 (its experimental
// 2025-11-25 tasks API, client.experimental.tasks) over Streamable HTTP with
// two API keys. A 20 s computation runs as a task while the client polls it,
// reads its live log output, starts and cancels another task, and checks that
// neither key sees the other's tasks. Then sandcastle's own tools as tasks in
// a real sandbox (execute_command, execute_code, a cancelled command that
// really stops), and finished results read back after a clean restart and
// after kill -9. The 2026-07-28 extension (SEP-2663) is covered by the
// official conformance suite (conformance.test.mjs).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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

const sc = (result) => result?.structuredContent;

// Runs `name` as a task to its end; returns the task and its result.
async function runTask(client, name, args) {
  const t = await startTask(client, name, args);
  assert.equal(t.task.status, 'working');
  const msgs = await t.rest;
  const statuses = msgs.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
  assert.equal(statuses.at(-1), 'completed', JSON.stringify(msgs).slice(0, 800));
  const result = msgs.find((m) => m.type === 'result')?.result;
  assert.ok(result, JSON.stringify(msgs).slice(0, 800));
  return { task: t.task, result };
}

async function createSandbox(client) {
  const r = await client.callTool({ name: 'create_sandbox', arguments: { language: 'bash' } });
  assert.ok(!r.isError, JSON.stringify(r).slice(0, 600));
  return sc(r).sandbox_id;
}

// A sleep no other process on the machine runs: 60 s and a fraction of this run's own.
const SLEEP = `60.${process.pid}`;

// Whether a process with exactly this command line runs on the host (where
// the test can see every sandbox's processes; a call in the sandbox lists
// only its own).
function hostRuns(cmdline) {
  try {
    return execFileSync('pgrep', ['-x', '-f', cmdline], { encoding: 'utf8' }).trim() !== '';
  } catch {
    return false;  // pgrep exits 1 when nothing matches
  }
}

describe('sandcastle\'s own tools as tasks, in a real sandbox', () => {
  let state, srv, a, sandbox;
  before(async () => {
    state = tempStateDir();
    const key = JSON.parse(keys(state, '--json', 'create', '--name', 'alice')).key;
    srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
    a = await connect(srv.url, key);
    sandbox = await createSandbox(a.client);
  });
  after(async () => {
    await a?.client.close();
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('the long tools take tasks', async () => {
    const { tools } = await a.client.listTools();
    const by = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ['execute_code', 'execute_command', 'install_packages', 'save_sandbox'])
      assert.equal(by[name]?.execution?.taskSupport, 'optional', name);
    assert.equal(by.create_sandbox.execution, undefined);
  });

  test('execute_command as a task: created at once, polled to completed, its result', async () => {
    const started = Date.now();
    const t = await startTask(a.client, 'execute_command', { sandbox_id: sandbox, command: 'sleep 2; echo done' });
    assert.equal(t.task.status, 'working');
    // Before the command could have finished: the call did not wait for it.
    assert.ok(Date.now() - started < 2000, `created in ${Date.now() - started} ms`);
    assert.equal((await a.client.experimental.tasks.getTask(t.task.taskId)).status, 'working');
    const msgs = await t.rest;
    assert.equal(msgs.filter((m) => m.type === 'taskStatus').at(-1)?.task.status, 'completed');
    const result = msgs.find((m) => m.type === 'result')?.result;
    assert.equal(sc(result)?.stdout, 'done\n', JSON.stringify(result).slice(0, 600));
    assert.equal(sc(result).exit_code, 0);
    assert.notEqual(result.isError, true);
    assert.ok(Date.now() - started >= 2000);
    const again = await a.client.experimental.tasks.getTaskResult(t.task.taskId, CallToolResultSchema);
    assert.deepEqual(sc(again), sc(result));
  });

  test('execute_code as a task', async () => {
    const { result } = await runTask(a.client, 'execute_code',
      { sandbox_id: sandbox, language: 'python', code: 'print(6*7)' });
    assert.equal(sc(result)?.stdout, '42\n', JSON.stringify(result).slice(0, 600));
    assert.notEqual(result.isError, true);
  });

  test('tasks/cancel stops the command in the sandbox', { timeout: 30000 }, async () => {
    await a.client.setLoggingLevel('info');
    const t = await startTask(a.client, 'execute_command',
      { sandbox_id: sandbox, command: `echo started; sleep ${SLEEP}; touch /workspace/late`, timeout_s: 120 });
    // Running for sure: its first output line came, and its sleep is a process.
    await waitFor(() => a.logs.some((l) => l._meta?.[RELATED]?.taskId === t.task.taskId &&
      /started/.test(JSON.stringify(l.data))), 'the command\'s first output');
    await waitFor(() => hostRuns(`sleep ${SLEEP}`), 'the sleep to run before the cancel');

    const cancelled = await a.client.experimental.tasks.cancelTask(t.task.taskId);
    assert.equal(cancelled.status, 'cancelled');
    const msgs = await t.rest;
    assert.ok(msgs.some((m) => m.type === 'error' && /cancelled/.test(m.error.message)), JSON.stringify(msgs));
    await waitFor(() => !hostRuns(`sleep ${SLEEP}`), 'the sleep to be gone after the cancel', 10000);
    assert.equal((await a.client.experimental.tasks.getTask(t.task.taskId)).status, 'cancelled');
    // The shell went with it: what it would run after the sleep never ran.
    const ls = await a.client.callTool({ name: 'execute_command',
      arguments: { sandbox_id: sandbox, command: 'test -e /workspace/late; echo $?' } });
    assert.equal(sc(ls)?.stdout, '1\n');
  });
});

describe('finished task results survive a restart', () => {
  let state, srv, a, b, keyA, keyB;
  const restart = async (signal) => {
    await a?.client.close().catch(() => {});
    await b?.client.close().catch(() => {});
    if (srv) {
      const r = await srv.stop(signal);
      if (signal === 'SIGKILL') assert.equal(r.signal, 'SIGKILL');
      else assert.equal(r.code, 0, srv.stderr());
    }
    srv = await startHttp(['--auth', '--pool-size', '0'], { stateDir: state });
    a = await connect(srv.url, keyA);
    b = await connect(srv.url, keyB);
  };
  before(async () => {
    state = tempStateDir();
    keyA = JSON.parse(keys(state, '--json', 'create', '--name', 'alice')).key;
    keyB = JSON.parse(keys(state, '--json', 'create', '--name', 'bob')).key;
    await restart();
  });
  after(async () => {
    await a?.client.close();
    await b?.client.close();
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  // The task as its owner reads it now, and the other key's -32602.
  async function readBack(id, expected) {
    const got = await a.client.experimental.tasks.getTask(id);
    assert.equal(got.status, 'completed');
    const result = await a.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.deepEqual(result, expected);
    assert.ok((await a.client.experimental.tasks.listTasks()).tasks.some((t) => t.taskId === id));
    await assert.rejects(b.client.experimental.tasks.getTask(id), (e) => e.code === -32602);
    await assert.rejects(b.client.experimental.tasks.getTaskResult(id, CallToolResultSchema), (e) => e.code === -32602);
    await assert.rejects(b.client.experimental.tasks.cancelTask(id), (e) => e.code === -32602);
  }

  for (const signal of ['SIGTERM', 'SIGKILL']) {
    test(`a completed execute_command task, read back after ${signal}`, { timeout: 30000 }, async () => {
      const sandbox = await createSandbox(a.client);
      const { task } = await runTask(a.client, 'execute_command',
        { sandbox_id: sandbox, command: `echo kept over ${signal}` });
      const before = await a.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema);
      assert.equal(sc(before)?.stdout, `kept over ${signal}\n`);
      await restart(signal);
      assert.ok(!srv.stderr().includes('task records'), srv.stderr());
      await readBack(task.taskId, before);
    });
  }
});
