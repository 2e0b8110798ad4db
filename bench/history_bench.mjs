#!/usr/bin/env node
// Run-history benchmark (issue 16): what recording each execute_code call
// in the state database costs. Two servers of the same build, each with a
// state directory of its own: one with the default history budget
// (--history-max-mb 256: every call appends an entry), one with
// --history-max-mb 0 (nothing recorded). Warm `x += 1` in a Python kernel,
// call by call interleaved (the order swapped every iteration), medians and
// p90, over --rounds fresh pairs of servers (the median of the per-round
// ratios is the figure least moved by other load). Target: the history
// write costs <= 5% of the round trip.
//
// Usage: node bench/history_bench.mjs [--sandcastle build/sandcastle]
//          [--iterations 2000] [--rounds 5] [--json]
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

// One round: a fresh pair of servers (so neither gains from where its
// processes happen to run), warmed up, then `n` calls each, interleaved.
async function round(bin, n) {
  const variants = [
    { name: 'history on (default 256 MiB)', args: [] },
    { name: 'history off (--history-max-mb 0)', args: ['--history-max-mb', '0'] },
  ];
  for (const v of variants) {
    v.dir = mkdtempSync(join(tmpdir(), 'sandcastle-history-bench-'));
    v.c = new LineClient(bin, ['--stdio', '--state-dir', v.dir, '--pool-size', '0', ...v.args]);
    await v.c.initialize('history-bench');
    v.id = (await v.c.callOk('create_sandbox', { language: 'python' })).sc.sandbox_id;
    await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x = 0' });
    v.t = [];
  }
  for (let i = 0; i < 200; i++)
    for (const v of variants) await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x += 1' });
  for (let i = 0; i < n; i++) {
    for (const v of i % 2 ? [...variants].reverse() : variants)
      v.t.push((await v.c.callOk('execute_code', { sandbox_id: v.id, code: 'x += 1' })).t);
  }
  const [on, off] = variants;
  const recorded = await on.c.callOk('get_sandbox_history', { sandbox_id: on.id, limit: 1 });
  const none = await off.c.callOk('get_sandbox_history', { sandbox_id: off.id, limit: 1 });
  if (recorded.sc.count !== 1 || none.sc.count !== 0) throw new Error('history was not recorded as configured');
  for (const v of variants) {
    await v.c.close();
    rmSync(v.dir, { recursive: true, force: true });
  }
  return { on: on.t, off: off.t };
}

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'history_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), iterations: 2000, rounds: 5, json: false },
    types: { sandcastle: 'path', iterations: 'int', rounds: 'int', json: 'flag' },
  });
  const load0 = loadavg();
  const on = [], off = [], ratios = [];
  for (let r = 0; r < opts.rounds; r++) {
    const res = await round(opts.sandcastle, opts.iterations);
    on.push(...res.on);
    off.push(...res.off);
    ratios.push(pct(res.on, 50) / pct(res.off, 50));
  }
  const out = {
    iterations: opts.iterations, rounds: opts.rounds, loadavg_before: load0, loadavg_after: loadavg(),
    on: { p50: pct(on, 50), p90: pct(on, 90), p99: pct(on, 99) },
    off: { p50: pct(off, 50), p90: pct(off, 90), p99: pct(off, 99) },
    round_ratios: ratios.map((x) => Number(x.toFixed(3))),
  };
  out.cost_p50_ms = out.on.p50 - out.off.p50;
  out.ratio_p50 = out.on.p50 / out.off.p50;
  out.ratio_median_of_rounds = pct(ratios, 50);
  if (opts.json) {
    console.log(JSON.stringify(out, null, 2));
    return;
  }
  console.log(`Warm \`x += 1\` execute_code round trips over stdio: ${opts.rounds} rounds of ${opts.iterations} ` +
              `calls per server, interleaved call by call; loadavg ${out.loadavg_before} -> ${out.loadavg_after}.`);
  console.log('');
  console.log('| server | p50 ms | p90 ms | p99 ms |');
  console.log('|---|---|---|---|');
  console.log(`| history on (default 256 MiB) | ${f3(out.on.p50)} | ${f3(out.on.p90)} | ${f3(out.on.p99)} |`);
  console.log(`| history off (--history-max-mb 0) | ${f3(out.off.p50)} | ${f3(out.off.p90)} | ${f3(out.off.p99)} |`);
  console.log('');
  console.log(`History on / off, p50: ${out.ratio_p50.toFixed(3)} (${f3(out.cost_p50_ms)} ms); per round ` +
              `${out.round_ratios.join(', ')}, median ${out.ratio_median_of_rounds.toFixed(3)}. Target: <= 1.05.`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
