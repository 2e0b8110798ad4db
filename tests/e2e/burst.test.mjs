// Bursts of one-shot execute_code calls (no sandbox_id), through the official
// TypeScript SDK v1 client over stdio: past the server's cap of live
// sandboxes a one-shot waits its turn in a bounded line, hearing its place
// through progress notifications, and fails only when its own timeout passes
// or the line is full, each with a message that says what to do. An explicit
// create_sandbox past the cap still refuses at once.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const QUEUED = /^queued: place (\d+) of (\d+) waiting for a sandbox \(the server runs its maximum of (\d+)\)$/;

describe('one-shot bursts wait their turn (SDK v1, stdio)', () => {
  let sc;     // default cap (64 sandboxes)
  let tiny;   // --max-sandboxes 1 --max-queued-runs 1
  before(async () => {
    [sc, tiny] = await Promise.all([
      connectSandcastle({ timeoutMs: 180000 }),
      connectSandcastle({ args: ['--max-sandboxes', '1', '--max-queued-runs', '1'], timeoutMs: 60000 }),
    ]);
  });
  after(async () => {
    await Promise.all([sc?.close(), tiny?.close()]);
  });

  test('200 concurrent one-shots at the default cap of 64: none fails, each answers its own code', async () => {
    const N = 200;
    const progress = Array.from({ length: N }, () => []);
    const calls = Array.from({ length: N }, (_, i) => {
      const args = i % 2 === 0
        ? { language: 'python', code: `print(${i} * ${i})` }
        : { language: 'bash', code: `echo $((${i} * ${i}))` };
      return sc.call('execute_code', args, {
        onprogress: (p) => progress[i].push(p),
        resetTimeoutOnProgress: true,
      });
    });
    const results = await Promise.all(calls);
    const failures = results.map((r, i) => [i, r]).filter(([i, r]) => r.isError || r.sc?.stdout !== `${i * i}\n`);
    assert.deepEqual(failures.map(([i, r]) => `${i}: ${r.text.slice(0, 200)}`), [], 'every call succeeds with its own output');
    for (const r of results) {
      assert.equal(r.sc.exit_code, 0);
      assert.equal(r.sc.sandbox_id, null, 'a one-shot keeps no sandbox');
    }
    // The calls past the cap were queued, heard their place, and say how long they waited.
    const queued = progress.map((ps, i) => [i, ps.filter((p) => QUEUED.test(p.message ?? ''))]).filter(([, ps]) => ps.length);
    assert.ok(queued.length > 0, 'with 200 calls at a cap of 64, some wait in line');
    for (const [i, ps] of queued) {
      const places = ps.map((p) => p.message.match(QUEUED).slice(1).map(Number));
      for (const [place, waiting, cap] of places) {
        assert.equal(cap, 64);
        assert.ok(place >= 1 && place <= waiting && waiting <= N, `place ${place} of ${waiting}`);
      }
      // Places only move forward (one caller: first come, first served).
      for (let k = 1; k < places.length; k++) assert.ok(places[k][0] < places[k - 1][0], JSON.stringify(places));
      assert.ok(results[i].sc.queued_ms > 0, `a queued call reports queued_ms: ${JSON.stringify(results[i].sc)}`);
      // Progress rises: the output chunks after the queue notices go on from them.
      const values = progress[i].map((p) => p.progress);
      assert.deepEqual(values, [...values].sort((a, b) => a - b));
    }
    // Every sandbox of the burst is gone (one-shots are destroyed afterwards).
    assert.deepEqual((await sc.ok('list_sandboxes')).sandboxes, []);
  });

  test('a full line refuses at once; create_sandbox refuses at the cap; the waiter runs when a slot frees', async () => {
    const held = await tiny.create();  // the one slot
    const created = await tiny.err('create_sandbox', {});
    assert.equal(created.text, 'the server already runs its maximum of 1 sandboxes; close one you no longer need '
      + '(close_sandbox) and retry [resource_exhausted]');

    let queuedNotice;
    const inLine = new Promise((resolve) => { queuedNotice = resolve; });
    const waiter = tiny.call('execute_code', { code: 'print("waited")' },
      { onprogress: (p) => { if (QUEUED.test(p.message ?? '')) queuedNotice(p.message); } });
    assert.equal(await inLine, 'queued: place 1 of 1 waiting for a sandbox (the server runs its maximum of 1)');

    const t0 = performance.now();
    const full = await tiny.err('execute_code', { code: 'print(1)' });
    assert.ok(performance.now() - t0 < 5000, 'a full line answers at once');
    assert.equal(full.text, 'the server already runs its maximum of 1 sandboxes; 1 one-shot runs already wait for '
      + 'a sandbox, the most that may wait (--max-queued-runs 1); retry in a moment, or start the server with a '
      + 'larger --max-sandboxes [resource_exhausted]');

    await tiny.ok('close_sandbox', { sandbox_id: held.sandbox_id });
    const r = await waiter;
    assert.equal(r.isError, false, r.text);
    assert.equal(r.sc.stdout, 'waited\n');
    assert.ok(r.sc.queued_ms > 0);
  });

  test('a waiter whose timeout passes in line gets an error saying how long it waited and what to do', async () => {
    const held = await tiny.create();
    try {
      const t0 = performance.now();
      const r = await tiny.err('execute_code', { code: 'print(1)', timeout_s: 1 });
      const waited = performance.now() - t0;
      assert.ok(waited >= 1000, `it waited its timeout (${waited} ms)`);
      assert.match(r.text, /^the server already runs its maximum of 1 sandboxes; this one-shot run waited 1\.\d s in line for a sandbox \(place 1 of 1\) until its timeout passed; close a sandbox you no longer need \(close_sandbox\), retry later, pass a larger timeout_s, or start the server with a larger --max-sandboxes \[resource_exhausted\]$/);
    } finally {
      await tiny.ok('close_sandbox', { sandbox_id: held.sandbox_id });
    }
  });

  test('a cancelled waiter leaves the line', async () => {
    const held = await tiny.create();
    try {
      const ac = new AbortController();
      let queuedNotice;
      const inLine = new Promise((resolve) => { queuedNotice = resolve; });
      const cancelled = tiny.call('execute_code', { code: 'print(1)' }, {
        signal: ac.signal, onprogress: (p) => { if (QUEUED.test(p.message ?? '')) queuedNotice(); },
      });
      await inLine;
      ac.abort('changed my mind');
      await assert.rejects(cancelled, /changed my mind|abort/i);
      // Its place is free: another call may queue (the line holds 1), and
      // runs once the slot frees.
      let second;
      const secondInLine = new Promise((resolve) => { second = resolve; });
      const next = tiny.call('execute_code', { code: 'print(2)' },
        { onprogress: (p) => { if (QUEUED.test(p.message ?? '')) second(p.message); } });
      assert.equal(await secondInLine, 'queued: place 1 of 1 waiting for a sandbox (the server runs its maximum of 1)');
      await tiny.ok('close_sandbox', { sandbox_id: held.sandbox_id });
      const r = await next;
      assert.equal(r.sc.stdout, '2\n', r.text);
    } catch (e) {
      await tiny.call('close_sandbox', { sandbox_id: held.sandbox_id });
      throw e;
    }
  });
});
