#!/usr/bin/env node
// Run-history benchmark (issue 16): what recording each execute_code call
// in the state database costs. Two servers of the same build, each with a
// state directory of its own: one with the default history budget
// (--history-max-mb 256: every call appends an entry), one with
// --history-max-mb 0 (nothing recorded). Warm `x += 1` in a Python kernel,
// call by call interleaved (the order swapped every iteration), medians and
// p90. Target: the history write costs <= 5% of the round trip.
//
// Usage: node bench/history_bench.mjs [--sandcastle build/sandcastle]
//          [--iterations 2000] [--json]
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const pct = (xs, p) => { const s = sorted(xs); return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]; };
const f3 = (x) => x.toFixed(3);

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'history_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), iterations: 2000, json: false },
    types: { sandcastle: 'path', iterations: 'int', json: 'flag' },
  });
  const variants = [
    { name: 'history on (default 256 MiB)', args: [] },
    { name: 'history off (--history-max-mb 0)', args: ['--history-max-mb', '0'] },
  ];
  for (const v of variants) {
    v.dir = mkdtempSync(join(tmpdir(), 'sandcastle-history-bench-'));
    v.c = new LineClient(opts.sandcastle, ['--stdio', '--state-dir', v.dir, '--pool-size', '0', ...v.args]);
    await v.c.initialize('history-bench');
    v.id = (await v.c.callOk('create_sandbox', { language: 'python' })).sc.sandbox_id;
    await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x = 0' });
    v.t = [];
  }
  const load0 = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  for (let i = 0; i < 200; i++)
    for (const v of variants) await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x += 1' });
  for (let i = 0; i < opts.iterations; i++) {
    for (const v of i % 2 ? [...variants].reverse() : variants)
      v.t.push((await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x += 1' })).t);
  }
  const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const [on, off] = variants;
  const recorded = await on.c.callOk('get_sandbox_history', { sandbox_id: on.id, limit: 1 });
  const none = await off.c.callOk('get_sandbox_history', { sandbox_id: off.id, limit: 1 });
  if (recorded.sc.count !== 1 || none.sc.count !== 0) throw new Error('history was not recorded as configured');
  for (const v of variants) {
    await v.c.close();
    rmSync(v.dir, { recursive: true, force: true });
  }
  const out = {
    iterations: opts.iterations,
    loadavg_before: load0,
    loadavg_after: load1,
    on: { p50: pct(on.t, 50), p90: pct(on.t, 90), p99: pct(on.t, 99) },
    off: { p50: pct(off.t, 50), p90: pct(off.t, 90), p99: pct(off.t, 99) },
  };
  out.cost_p50_ms = out.on.p50 - out.off.p50;
  out.ratio_p50 = out.on.p50 / out.off.p50;
  // Per-pair differences: the noise of the machine cancels pair by pair.
  out.pair_diff_median_ms = pct(on.t.map((t, i) => t - off.t[i]), 50);
  if (opts.json) {
    console.log(JSON.stringify(out, null, 2));
    return;
  }
  console.log(`Warm \`x += 1\` execute_code round trips over stdio, ${opts.iterations} each, interleaved; ` +
              `loadavg ${load0} -> ${load1}.`);
  console.log('');
  console.log('| server | p50 ms | p90 ms | p99 ms |');
  console.log('|---|---|---|---|');
  for (const [name, r] of [[on, out.on], [off, out.off]].map(([v, r]) => [v.name, r]))
    console.log(`| ${name} | ${f3(r.p50)} | ${f3(r.p90)} | ${f3(r.p99)} |`);
  console.log('');
  console.log(`History write: p50 ${f3(out.cost_p50_ms)} ms (ratio ${out.ratio_p50.toFixed(3)}), ` +
              `median of pairwise differences ${f3(out.pair_diff_median_ms)} ms; target <= 5% of the round trip.`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
