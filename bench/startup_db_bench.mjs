#!/usr/bin/env node
// Start-up with a full run history (issue 16): a stdio server may start once
// per conversation, and PRAGMA quick_check reads the whole state database
// (the history alone may be 256 MiB). A start now reads the header and the
// schema and writes one row; quick_check runs only after a run that did not
// stop cleanly, or with --check-db (what every start did before).
//
// One state dir holding a history of --mib MiB (rows as the server writes
// them, filled with python3's sqlite3), started over and over by the same
// binary, the variants interleaved: after a clean stop (cheap), with
// --check-db (the old cost), and after a kill -9 (the next start checks).
// Timed: spawn to the initialize answer; with the file in the page cache,
// and with it evicted first (as after a reboot).
//
// Usage: node bench/startup_db_bench.mjs [--sandcastle build/sandcastle]
//          [--iterations 15] [--mib 250] [--json]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const pct = (xs, p) => { const s = sorted(xs); return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]; };
const f1 = (x) => x.toFixed(1);
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

// History rows of 64 KiB of output each, as many as make `mib` MiB, with
// the budget's running total where the server keeps it.
function fill(db, mib) {
  execFileSync('/usr/bin/python3', ['-c', `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2]) * 16
c.executemany("INSERT INTO sandbox_history(sandbox_id, at_us, caller, tool, language, input, stdout, "
              "stderr, truncated, exit_code, reason, duration_us, files_created, images, bytes) "
              "VALUES('sb-bench', ?, '', 'execute_code', 'python', 'print(x)', randomblob(65536), "
              "'', 0, 0, 'exited', 1000, '[]', 0, 65536)", [(i,) for i in range(n)])
c.execute("UPDATE sandbox_meta SET value = ? WHERE key = 'history_bytes'", (n * 65536,))
c.commit(); c.close()`, db, String(mib)]);
}

// Drops the database file's pages from the page cache (that file only:
// POSIX_FADV_DONTNEED), as after a reboot or a long idle time.
function evict(db) {
  for (const f of [db, `${db}-wal`])
    execFileSync('/usr/bin/python3', ['-c', `import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
except FileNotFoundError:
    sys.exit(0)
os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)`, f]);
}

// One start: spawn to the initialize answer; then a clean stop (stdin
// closed) or a kill -9.
async function start(bin, dir, extra, stop) {
  const t0 = performance.now();
  const c = new LineClient(bin, ['--stdio', '--state-dir', dir, '--pool-size', '0', ...extra]);
  await c.initialize('startup-db-bench');
  const ms = performance.now() - t0;
  if (stop === 'kill') {
    c.proc.kill('SIGKILL');
    await c.exited;
  } else {
    await c.close();
    const { code } = await c.exited;
    if (code !== 0) throw new Error(`server exited ${code}: ${c.stderr.slice(-500)}`);
  }
  return ms;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'startup_db_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), iterations: 15, mib: 250, json: false },
    types: { sandcastle: 'path', iterations: 'int', mib: 'int', json: 'flag' },
  });
  const dir = mkdtempSync(join(tmpdir(), 'sandcastle-startup-db-bench-'));
  try {
    await start(opts.sandcastle, dir, [], 'clean');  // makes the schema
    fill(join(dir, 'sandcastle.db'), opts.mib);
    const dbBytes = statSync(join(dir, 'sandcastle.db')).size;
    await start(opts.sandcastle, dir, ['--check-db'], 'clean');  // warms the page cache
    const load0 = loadavg();
    const db = join(dir, 'sandcastle.db');
    const v = { clean: [], check: [], afterKill: [], cleanCold: [], checkCold: [] };
    for (let i = 0; i < opts.iterations; i++) {
      // The order turns every iteration; a kill -9 start precedes each
      // after-kill one, an eviction from the page cache each cold one
      // (neither is timed).
      const kinds = ['clean', 'afterKill', 'check', 'cleanCold', 'checkCold'];
      for (const k of i % 2 ? kinds.reverse() : kinds) {
        if (k === 'afterKill') await start(opts.sandcastle, dir, [], 'kill');
        if (k.endsWith('Cold')) evict(db);
        const check = k.startsWith('check') ? ['--check-db'] : [];
        v[k].push(await start(opts.sandcastle, dir, check, 'clean'));
      }
    }
    const out = {
      iterations: opts.iterations, db_mib: dbBytes / 2 ** 20, loadavg_before: load0, loadavg_after: loadavg(),
      clean: { p50: pct(v.clean, 50), p90: pct(v.clean, 90) },
      check: { p50: pct(v.check, 50), p90: pct(v.check, 90) },
      after_kill: { p50: pct(v.afterKill, 50), p90: pct(v.afterKill, 90) },
      clean_cold: { p50: pct(v.cleanCold, 50), p90: pct(v.cleanCold, 90) },
      check_cold: { p50: pct(v.checkCold, 50), p90: pct(v.checkCold, 90) },
    };
    out.ratio_cold_p50 = out.clean_cold.p50 / out.check_cold.p50;
    out.ratio_p50 = out.clean.p50 / out.check.p50;
    if (opts.json) {
      console.log(JSON.stringify(out, null, 2));
      return;
    }
    console.log(`Server start (spawn to initialize answered) on a ${f1(out.db_mib)} MiB state database ` +
                `(run history), ${opts.iterations} starts per variant, interleaved; loadavg ` +
                `${out.loadavg_before} -> ${out.loadavg_after}.`);
    console.log('');
    console.log('| start | p50 ms | p90 ms |');
    console.log('|---|---|---|');
    console.log(`| after a clean stop (header, schema, one write) | ${f1(out.clean.p50)} | ${f1(out.clean.p90)} |`);
    console.log(`| --check-db (quick_check: what every start did before) | ${f1(out.check.p50)} | ${f1(out.check.p90)} |`);
    console.log(`| after a kill -9 (quick_check) | ${f1(out.after_kill.p50)} | ${f1(out.after_kill.p90)} |`);
    console.log(`| after a clean stop, file not in the page cache | ${f1(out.clean_cold.p50)} | ${f1(out.clean_cold.p90)} |`);
    console.log(`| --check-db, file not in the page cache | ${f1(out.check_cold.p50)} | ${f1(out.check_cold.p90)} |`);
    console.log('');
    console.log(`Clean / --check-db, p50: ${out.ratio_p50.toFixed(3)} (page cache), ${out.ratio_cold_p50.toFixed(3)} (cold).`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
