// The server keeps one warm pool (the native backend's), of the size asked
// for: `--pool-size 0` leaves no sandbox init (and no zygote) waiting once
// the sandboxes it ran are gone, and `--pool-size 1` keeps exactly one init
// ready, not one per layer as when the tool layer kept a pool of its own on
// top of the backend's.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle } from './lib/sandbox_client.mjs';
import { procTable, sleep } from './lib/harness.mjs';

// The server's zygotes and the inits they cloned (live ones only).
function tree(root) {
  const table = [...procTable()].map(([pid, p]) => ({ pid, ...p })).filter((p) => p.state !== 'Z' && p.state !== 'X');
  const zygotes = table.filter((p) => p.ppid === root && p.comm === 'sc-zygote').map((p) => p.pid);
  const inits = table.filter((p) => zygotes.includes(p.ppid)).length;
  return { zygotes: zygotes.length, inits };
}

async function until(what, cond, ms = 30000) {
  const t0 = Date.now();
  for (;;) {
    const v = cond();
    if (v.ok) return v;
    if (Date.now() - t0 > ms) assert.fail(`${what}: ${JSON.stringify(v)}`);
    await sleep(20); // the kernel's process table has no event to wait on
  }
}

describe('warm pool', () => {
  test('--pool-size 0: no init is kept ready, before or after a call', async () => {
    const sc = await connectSandcastle({ args: ['--pool-size', '0'] });
    try {
      const pid = sc.transport.pid;
      assert.ok(pid > 0);
      assert.deepEqual(tree(pid), { zygotes: 0, inits: 0 }, 'nothing made before the first call');
      const r = await sc.ok('execute_code', { language: 'python', code: 'print(1)' });
      assert.equal(r.stdout, '1\n');
      // The one-shot's sandbox is torn down after the answer: then none is left.
      await until('inits once the one-shot is gone', () => ({ ...tree(pid), ok: tree(pid).inits === 0 }));
    } finally {
      await sc.close();
    }
  });

  test('--pool-size 1: exactly one init ready, one pool only', async () => {
    const sc = await connectSandcastle({ args: ['--pool-size', '1'] });
    try {
      const pid = sc.transport.pid;
      await until('one init ready', () => ({ ...tree(pid), ok: tree(pid).inits >= 1 }));
      // A second layer's pool would be filling now: watch a while for it.
      for (let i = 0; i < 25; i++) {
        assert.equal(tree(pid).inits, 1, 'more than the one warm sandbox asked for');
        await sleep(20);
      }
    } finally {
      await sc.close();
    }
  });
});
