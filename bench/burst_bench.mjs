#!/usr/bin/env node
// Burst benchmark over stdio (issue 14): N one-shot `execute_code` calls sent
// at once (no sandbox_id: each call gets a sandbox of its own, destroyed
// afterwards), N = 1, 10, 50, 200, per language, against N bare processes
// doing the same started at once from this Node process (`python3 -c
// 'print(1)'`, `node -e`, `bash -c 'echo 1'`, ...; compiled languages compile
// and run in a temporary directory). The server runs with its defaults (cap
// of 64 live sandboxes, warm pool of 2), so N = 200 exercises the admission
// line: calls past the cap wait their turn instead of failing.
//
// Two sandcastle figures per burst, from a server started afresh for each
// round: cold, the first burst it sees (its pool holds 2: nearly every
// sandbox is made on the request path); and again, the same burst sent once
// more after the pool has grown to it (the arrival rate it learnt from the
// first: what a platform whose bursts recur sees) — the pool's ready count
// when it starts is shown.
//
// Wall time is from the first request written to the last response read (and
// from the first spawn to the last exit for bare). Each round runs bare and
// sandcastle back to back (order alternating); the table shows medians over
// rounds and the total failures (an error, or output other than "1\n").
//
// With --baseline-bin PATH (another build of sandcastle) the same cold bursts
// also run against it, in columns of their own.
// With --unshare the bare bursts also run with each process in namespaces
// of its own (util-linux unshare): the floor any per-call isolation pays.
//
// Usage: node bench/burst_bench.mjs [--sandcastle build/sandcastle] [--baseline-bin PATH]
//          [--sizes 1,10,50,200] [--languages python,javascript,bash,...] [--rounds 3] [--unshare] [--json]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';
import { sandboxInits } from './lib/proc.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');

// What each language runs, and the bare equivalent (argv; {dir} is a fresh
// temporary directory holding `file` with the code, for compiled languages).
const LANGS = {
  python: { code: 'print(1)', bare: ['/usr/bin/python3', '-c', 'print(1)'] },
  javascript: { code: 'console.log(1)', bare: ['/usr/bin/node', '-e', 'console.log(1)'] },
  bash: { code: 'echo 1', bare: ['/bin/bash', '-c', 'echo 1'] },
  sh: { code: 'echo 1', bare: ['/bin/sh', '-c', 'echo 1'] },
  perl: { code: 'print "1\\n";', bare: ['/usr/bin/perl', '-e', 'print "1\\n";'] },
  ruby: { code: 'puts 1', bare: ['/usr/bin/ruby', '-e', 'puts 1'] },
  c: { needs: ['/usr/bin/gcc'], code: '#include <stdio.h>\nint main(void) { puts("1"); return 0; }\n', file: 'main.c',
    bare: ['/bin/sh', '-c', 'cd {dir} && /usr/bin/gcc -O2 -pipe -o main main.c -lm && ./main'] },
  cpp: { needs: ['/usr/bin/g++'], code: '#include <cstdio>\nint main() { std::puts("1"); }\n', file: 'main.cpp',
    bare: ['/bin/sh', '-c', 'cd {dir} && /usr/bin/g++ -O2 -pipe -std=c++20 -o main main.cpp && ./main'] },
  go: { needs: ['/usr/bin/go'], code: 'package main\nimport "fmt"\nfunc main() { fmt.Println(1) }\n', file: 'main.go',
    bare: ['/bin/sh', '-c', 'cd {dir} && /usr/bin/go build -o main main.go && ./main'] },
  rust: { needs: ['/usr/bin/rustc'], code: 'fn main() { println!("1"); }\n', file: 'main.rs',
    bare: ['/bin/sh', '-c', 'cd {dir} && /usr/bin/rustc -O -o main main.rs && ./main'] },
  typescript: { needs: ['/usr/bin/tsc', '/usr/bin/node'], code: 'console.log(1);\n', file: 'main.ts',
    bare: ['/bin/sh', '-c', 'cd {dir} && /usr/bin/tsc --outDir . main.ts && /usr/bin/node main.js'] },
  java: { code: 'class Main { public static void main(String[] a) { System.out.println(1); } }\n', file: 'Main.java',
    bare: ['/usr/bin/java', '{dir}/Main.java'] },
};
// Interpreted languages are cheap enough for the default run; compiled ones
// (200 compilers at once) take minutes on a small machine: ask for them.
const DEFAULT_LANGS = ['python', 'javascript', 'bash', 'sh', 'perl', 'ruby'];

const sorted = (xs) => [...xs].sort((a, b) => a - b);
const median = (xs) => { const s = sorted(xs); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
const ms = (x) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)) : 'n/a');
const sleep = (t) => new Promise((r) => setTimeout(r, t));

// A clean environment, as sandboxes get (an inherited NODE_EXTRA_CA_CERTS
// alone triples node's start-up).
function bareEnv(home) {
  return { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', GOCACHE: join(home, '.gocache') };
}

// The isolation floor: each bare process in fresh namespaces of the kinds a
// sandbox gets (mount, pid, net, ipc, uts; a user namespace too when not
// root), made by util-linux unshare: what any per-call namespace sandbox
// pays before doing anything of its own.
const UNSHARE = ['/usr/bin/unshare', ...(process.getuid() === 0 ? [] : ['-r']), '-m', '-p', '-n', '-i', '-u', '-f', '--'];

function bareOne(lang, home, isolated = false) {
  const spec = LANGS[lang];
  let dir = null;
  if (spec.file) {
    dir = mkdtempSync(join(home, 'run-'));
    writeFileSync(join(dir, spec.file), spec.code);
  }
  const argv = [...(isolated ? UNSHARE : []), ...spec.bare.map((a) => (dir ? a.replaceAll('{dir}', dir) : a))];
  return new Promise((resolve) => {
    const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'], env: bareEnv(home) });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('error', () => resolve(false));
    p.on('close', (code) => {
      if (dir) rmSync(dir, { recursive: true, force: true });
      resolve(code === 0 && out === '1\n');
    });
  });
}

async function bareBurst(lang, n, home, isolated = false) {
  const t0 = performance.now();
  const ok = await Promise.all(Array.from({ length: n }, () => bareOne(lang, home, isolated)));
  return { wall: performance.now() - t0, failures: ok.filter((x) => !x).length };
}

class Server extends LineClient {
  // Live sandbox inits (warm pool + live sandboxes).
  children() {
    return sandboxInits(this.proc.pid);
  }

  // Until the count has not changed for `quietMs` (and is at least `least`):
  // the last burst's sandboxes gone, the pool made to its target.
  async steady(least = 0, quietMs = 700, timeoutMs = 60000) {
    const t0 = performance.now();
    let last = -2, since = performance.now();
    while (performance.now() - t0 < timeoutMs) {
      const c = this.children();
      if (c !== last) { last = c; since = performance.now(); }
      else if (c >= least && performance.now() - since >= quietMs) break;
      await sleep(25);
    }
    return last;
  }
}

// Until the machine's CPUs have been at least 90 % idle for 200 ms (two
// samples), at most 10 s: the kernel finishes its deferred work of the last
// burst (network namespaces are freed by a worker thread, RCU callbacks)
// before the next timed one, bare or not.
function cpuTimes() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3] + f[4], total: f.reduce((a, b) => a + b, 0) };
}
async function cpuQuiet(timeoutMs = 10000) {
  const t0 = performance.now();
  let prev = cpuTimes(), calm = 0;
  while (calm < 2 && performance.now() - t0 < timeoutMs) {
    await sleep(100);
    const now = cpuTimes();
    const total = now.total - prev.total;
    calm = total > 0 && (now.idle - prev.idle) / total >= 0.9 ? calm + 1 : 0;
    prev = now;
  }
}

const POOL = 2;
async function startServer(bin) {
  const s = new Server(bin, ['--log-level', 'warn', '--pool-size', String(POOL)]);
  await s.initialize('burst-bench');
  await s.steady(POOL);
  return s;
}

async function sandcastleBurst(server, lang, n) {
  const spec = LANGS[lang];
  const args = { code: spec.code, language: lang, timeout_s: spec.file ? 600 : 120 };
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: n }, () => server.request('tools/call', { name: 'execute_code', arguments: args })
    .then(({ msg }) => msg, (e) => ({ error: { message: String(e.message) } }))));
  const wall = performance.now() - t0;
  let failures = 0;
  let sample = null;
  const dur = [], queued = [];
  for (const msg of results) {
    const sc = msg.result?.structuredContent;
    if (msg.error || msg.result?.isError || sc?.stdout !== '1\n') {
      failures++;
      sample ??= JSON.stringify(msg.error ?? msg.result?.content?.[0]?.text ?? msg).slice(0, 240);
    } else {
      dur.push(sc.duration_ms);
      queued.push(sc.queued_ms ?? 0);
    }
  }
  return { wall, failures, sample, exec50: median(dur), queuedMax: queued.length ? Math.max(...queued) : NaN };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'burst_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), sizes: [1, 10, 50, 200], languages: DEFAULT_LANGS.join(','),
      rounds: 3, json: false, unshare: false },
    types: { sandcastle: 'path', 'baseline-bin': 'path', sizes: 'list', languages: 'words', rounds: 'int', json: 'flag', unshare: 'flag' },
  });
  if (!existsSync(opts.sandcastle)) throw new Error(`sandcastle not found at ${opts.sandcastle}; build it first`);
  const langs = opts.languages.split(',').filter(Boolean);
  for (const l of langs) if (!LANGS[l]) throw new Error(`unknown language ${l}; known: ${Object.keys(LANGS).join(', ')}`);
  const available = langs.filter((l) => (LANGS[l].needs ?? [LANGS[l].bare[0]]).every((b) => existsSync(b)));
  const home = mkdtempSync(join(tmpdir(), 'burst-bench-'));
  const baseBin = opts['baseline-bin'];
  const rows = [];
  const servers = new Set();
  // A server of its own for each round: its first burst is cold.
  const withServer = async (bin, fn) => {
    const s = await startServer(bin);
    servers.add(s);
    try { return await fn(s); } finally { servers.delete(s); await s.close(); }
  };
  try {
    for (const lang of available) {
      // Warm-up: page cache, the language's first start.
      await bareBurst(lang, 2, home);
      await withServer(opts.sandcastle, (s) => sandcastleBurst(s, lang, 2));
      for (const n of opts.sizes) {
        const sc = [], again = [], bare = [], bs = [], iso = [];
        for (let r = 0; r < opts.rounds; r++) {
          const steps = [async () => { await cpuQuiet(); bare.push(await bareBurst(lang, n, home)); },
            () => withServer(opts.sandcastle, async (s) => {
              await cpuQuiet();
              sc.push(await sandcastleBurst(s, lang, n));
              // The pool grows to the burst it saw: the same burst again.
              // (The pool sizes itself from a decayed count of arrivals: a
              // little under N when they came spread over the first burst.)
              const ready = await s.steady(Math.ceil(0.8 * Math.min(n, 64)));
              await cpuQuiet();
              again.push({ ...(await sandcastleBurst(s, lang, n)), ready });
            })];
          if (opts.unshare) steps.splice(1, 0, async () => { await cpuQuiet(); iso.push(await bareBurst(lang, n, home, true)); });
          if (baseBin) {
            steps.push(() => withServer(baseBin, async (s) => {
              await cpuQuiet();
              bs.push(await sandcastleBurst(s, lang, n));
            }));
          }
          if (r % 2) steps.reverse();
          for (const step of steps) await step();
        }
        const row = {
          n, lang,
          sandcastle: median(sc.map((x) => x.wall)), bare: median(bare.map((x) => x.wall)),
          again: median(again.map((x) => x.wall)), againReady: median(again.map((x) => x.ready)),
          failures: [...sc, ...again].reduce((a, x) => a + x.failures, 0), bareFailures: bare.reduce((a, x) => a + x.failures, 0),
          calls: 2 * n * opts.rounds, exec50: median(sc.map((x) => x.exec50)), queuedMax: Math.max(...sc.map((x) => x.queuedMax)),
          sample: [...sc, ...again].find((x) => x.sample)?.sample ?? null,
          baseline: baseBin ? median(bs.map((x) => x.wall)) : NaN, baseFailures: bs.reduce((a, x) => a + x.failures, 0),
          baseSample: bs.find((x) => x.sample)?.sample ?? null,
          unshare: opts.unshare ? median(iso.map((x) => x.wall)) : NaN,
        };
        rows.push(row);
        if (!opts.json) {
          process.stderr.write(`burst_bench: ${lang} N=${n}: cold ${ms(row.sandcastle)} ms, again ${ms(row.again)} ms ` +
            `vs bare ${ms(row.bare)} ms, ${row.failures} failures\n`);
        }
      }
    }
  } finally {
    for (const s of servers) await s.close();
    rmSync(home, { recursive: true, force: true });
  }
  if (opts.json) {
    console.log(JSON.stringify(rows, null, 2));
  } else {
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    console.log(`N one-shot \`execute_code\` calls sent at once over one stdio client (server defaults: cap 64, pool ${POOL}), ` +
      `vs N bare processes started at once; median wall time over ${opts.rounds} rounds, bare and sandcastle interleaved, ` +
      `a server started afresh for each round; "cold": its first burst; "again": the same burst once the pool has grown to it; ` +
      `load average at the end ${load}.`);
    console.log('');
    const bh = (opts.unshare ? ' bare under unshare ms | its ratio to bare | cold / unshare |' : '') +
      (baseBin ? ' baseline cold ms | baseline ratio | baseline failures |' : '');
    console.log(`| N | language | cold ms | ratio | again ms | ratio | ready at its start | bare ms | failures | exec in sandbox p50 ms (cold) | longest wait in line ms |${bh}`);
    console.log(`|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|${opts.unshare ? '---:|---:|---:|' : ''}${baseBin ? '---:|---:|---:|' : ''}`);
    for (const r of rows) {
      const bc = (opts.unshare ? ` ${ms(r.unshare)} | ${(r.unshare / r.bare).toFixed(2)}× | ${(r.sandcastle / r.unshare).toFixed(2)}× |` : '') +
        (baseBin ? ` ${ms(r.baseline)} | ${(r.baseline / r.bare).toFixed(2)}× | ${r.baseFailures}/${r.n * opts.rounds} |` : '');
      console.log(`| ${r.n} | ${r.lang} | ${ms(r.sandcastle)} | ${(r.sandcastle / r.bare).toFixed(2)}× | ${ms(r.again)} | ` +
        `${(r.again / r.bare).toFixed(2)}× | ${r.againReady} | ${ms(r.bare)} | ` +
        `${r.failures}/${r.calls}${r.bareFailures ? ` (bare: ${r.bareFailures})` : ''} | ${ms(r.exec50)} | ${ms(r.queuedMax)} |${bc}`);
    }
    if (baseBin) console.log(`\nbaseline: ${baseBin}`);
    for (const r of rows) if (r.sample) console.log(`\n${r.lang} N=${r.n} failure sample: ${r.sample}`);
    for (const r of rows) if (r.baseSample) console.log(`\nbaseline ${r.lang} N=${r.n} failure sample: ${r.baseSample}`);
  }
  if (rows.some((r) => r.failures)) process.exitCode = 1;
}

main().catch((e) => {
  console.error(`burst_bench: ${e.stack ?? e}`);
  process.exit(1);
});
