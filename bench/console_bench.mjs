#!/usr/bin/env node
// The web console's first load in headless Chromium (Debian's chromium via
// puppeteer-core from tests/e2e/node_modules) against sandcastle on
// loopback, without auth (the console opens straight on the sandbox list):
//   cold: a fresh browser profile each time; bytes transferred (headers and
//         gzip bodies, as the DevTools protocol counts them), requests, and
//         time to interactive (navigation start → the console's 'sc-ready'
//         mark: first screen rendered and usable);
//   warm: the same profile loading again (index revalidated with its ETag,
//         assets from the cache);
//   idle: the server's CPU (utime + stime of its process) while one console
//         sits on the sandbox list with 3 idle sandboxes for --idle-s seconds
//         (the live stream open, nothing changing).
// Prints medians (and p90 of TTI) over --iterations loads.
//
// Usage: node bench/console_bench.mjs [--sandcastle build/sandcastle] [--iterations 15] [--idle-s 30] [--json]
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { cpuSeconds, startHttpServer } from './lib/proc.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/console_bench.mjs',
  defaults: { sandcastle: join(root, 'build', 'sandcastle'), iterations: 15, 'idle-s': 30, json: false },
  types: { sandcastle: 'path', iterations: 'int', 'idle-s': 'int', json: 'flag' },
});
const { launchBrowser } = await import(join(root, 'tests', 'e2e', 'lib', 'browser.mjs'));

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
}
function p90(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.9) - 1)];
}


async function load(page, cdp, url) {
  const sizes = new Map();
  const onDone = (e) => sizes.set(e.requestId, e.encodedDataLength);
  cdp.on('Network.loadingFinished', onDone);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => document.documentElement.dataset.ready === '1', { timeout: 10000, polling: 5 });
  const tti = await page.evaluate(() => performance.getEntriesByName('sc-ready')[0].startTime);
  // Let late requests (the live stream's first bytes aside) finish counting.
  await new Promise((r) => setTimeout(r, 200));
  cdp.off('Network.loadingFinished', onDone);
  return { tti, bytes: [...sizes.values()].reduce((a, b) => a + b, 0), requests: sizes.size };
}


const srv = await startHttpServer(opts.sandcastle);
const browser = await launchBrowser();
const cold = [];
const warm = [];
let idle = null;
try {
  // Idle cost first, on a quiet server.
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${srv.base}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ language: 'bash' }) });
    if (r.status !== 201) throw new Error(`create: ${r.status} ${await r.text()}`);
  }
  {
    const page = await browser.newPage();
    await page.goto(`${srv.base}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.documentElement.dataset.ready === '1', { timeout: 10000 });
    await new Promise((r) => setTimeout(r, 3000));
    const c0 = cpuSeconds(srv.pid);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, opts['idle-s'] * 1000));
    const seconds = (performance.now() - t0) / 1000;
    idle = { seconds: Math.round(seconds), cpu_pct: Math.round(((cpuSeconds(srv.pid) - c0) / seconds) * 1000) / 10 };
    await page.close();
  }
  for (let i = 0; i < opts.iterations + 1; i++) {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    const cdp = await page.createCDPSession();
    await cdp.send('Network.enable');
    const c = await load(page, cdp, `${srv.base}/`);
    const w = await load(page, cdp, `${srv.base}/?again`);
    // The first round warms the server and the browser process; not counted.
    if (i > 0) { cold.push(c); warm.push(w); }
    await context.close();
  }
} finally {
  await browser.close();
  srv.stop();
}

const row = (name, xs) => ({
  load: name,
  bytes: median(xs.map((x) => x.bytes)),
  requests: median(xs.map((x) => x.requests)),
  tti_ms: Math.round(median(xs.map((x) => x.tti)) * 10) / 10,
  tti_p90_ms: Math.round(p90(xs.map((x) => x.tti)) * 10) / 10,
});
const rows = [row('cold (empty cache)', cold), row('warm (cached, revalidated)', warm)];
if (opts.json) {
  console.log(JSON.stringify({ iterations: opts.iterations, rows, idle }, null, 2));
} else {
  console.log(`Console first load, headless Chromium on loopback, median of ${opts.iterations} loads (budget: ≤ 150 KiB, TTI ≤ 300 ms)\n`);
  console.log('| load | transferred | requests | time to interactive (median) | p90 |');
  console.log('|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.load} | ${(r.bytes / 1024).toFixed(1)} KiB | ${r.requests} | ${r.tti_ms} ms | ${r.tti_p90_ms} ms |`);
  console.log(`\nServer CPU with one idle console open on the list (3 idle sandboxes, ${idle.seconds} s): ${idle.cpu_pct}% of a core (budget: ≤ 1%)`);
}
