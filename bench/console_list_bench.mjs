#!/usr/bin/env node
// The console's live list with many real sandboxes (issue 18: "500 sandboxes
// stays responsive; one SSE stream, diffs, not a full reload; an open console
// costs the server <= 1% of a core when nothing changes"). Against sandcastle
// on loopback without auth, in headless Chromium (Debian's chromium via
// puppeteer-core from tests/e2e/node_modules):
//   - creates --count native sandboxes (bash) through the REST API;
//   - first render: navigation start to every row in the DOM;
//   - idle: the server's CPU over --idle-s seconds with no console, then with
//     one open (the difference is the console's cost), and the page's
//     main-thread time (the DevTools protocol's TaskDuration), nothing changing;
//   - diffs: a sandbox created or closed while the list is open, from the
//     REST call's answer to its row appearing / going (median of 10 each),
//     the rows that were not touched kept (same DOM nodes, no reload);
//   - the longest main-thread task while all of that happened.
//
// Usage: node bench/console_list_bench.mjs [--sandcastle build/sandcastle] [--count 500] [--idle-s 20] [--json]
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { cpuSeconds, startHttpServer } from './lib/proc.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/console_list_bench.mjs',
  defaults: { sandcastle: join(root, 'build', 'sandcastle'), count: 500, 'idle-s': 20, json: false },
  types: { sandcastle: 'path', count: 'int', 'idle-s': 'int', json: 'flag' },
});
const { launchBrowser } = await import(join(root, 'tests', 'e2e', 'lib', 'browser.mjs'));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};
const round1 = (x) => Math.round(x * 10) / 10;


function rssMiB(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

async function create(base) {
  const r = await fetch(`${base}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ language: 'bash' }) });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${await r.text()}`);
  return (await r.json()).sandbox_id;
}
async function close(base, id) {
  const r = await fetch(`${base}/api/v1/sandboxes/${id}`, { method: 'DELETE' });
  if (r.status !== 200 && r.status !== 204) throw new Error(`close ${id}: ${r.status} ${await r.text()}`);
}

const rowCount = (page) => page.evaluate(() => document.querySelectorAll('[role=row][data-id]').length);
async function taskSeconds(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return metrics.find((m) => m.name === 'TaskDuration').value;
}

const cap = String(opts.count + 50);
const srv = await startHttpServer(opts.sandcastle, ['--max-sandboxes', cap, '--max-per-key', cap]);
const browser = await launchBrowser();
const result = { count: opts.count };
try {
  const t0 = performance.now();
  const ids = [];
  for (let i = 0; i < opts.count; i += 8) {
    const batch = Array.from({ length: Math.min(8, opts.count - i) }, () => create(srv.base));
    ids.push(...(await Promise.all(batch)));
  }
  result.create_all_s = round1((performance.now() - t0) / 1000);
  result.server_rss_mib = rssMiB(srv.pid);

  // The server's own idle cost with these sandboxes and no console: the
  // console's cost is what opening one adds to it.
  {
    await new Promise((r) => setTimeout(r, 3000));
    const c0 = cpuSeconds(srv.pid);
    const i0 = performance.now();
    await new Promise((r) => setTimeout(r, opts['idle-s'] * 1000));
    result.idle_no_console_cpu_pct = round1(((cpuSeconds(srv.pid) - c0) / ((performance.now() - i0) / 1000)) * 100);
  }

  const page = await browser.newPage();
  await page.evaluateOnNewDocument(() => {
    window.__longest = 0;
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longest = Math.max(window.__longest, e.duration); })
      .observe({ type: 'longtask', buffered: true });
  });
  const cdp = await page.createCDPSession();
  await cdp.send('Performance.enable');
  await page.goto(`${srv.base}/`, { waitUntil: 'load' });
  await page.waitForFunction((n) => document.querySelectorAll('[role=row][data-id]').length === n,
    { timeout: 60000, polling: 'raf' }, opts.count);
  result.first_render_ms = Math.round(await page.evaluate(() => performance.now()));

  // Idle: nothing changes (the usage ticker still samples every sandbox).
  await new Promise((r) => setTimeout(r, 3000));
  const c0 = cpuSeconds(srv.pid);
  const k0 = await taskSeconds(cdp);
  const i0 = performance.now();
  await new Promise((r) => setTimeout(r, opts['idle-s'] * 1000));
  const idleS = (performance.now() - i0) / 1000;
  result.idle_server_cpu_pct = round1(((cpuSeconds(srv.pid) - c0) / idleS) * 100);
  result.console_cost_cpu_pct = round1(result.idle_server_cpu_pct - result.idle_no_console_cpu_pct);
  result.idle_page_main_thread_pct = round1(((await taskSeconds(cdp) - k0) / idleS) * 100);

  // Diffs: the first row's node must survive every change below.
  await page.evaluate(() => { window.__kept = document.querySelector('[role=row][data-id]:last-of-type'); });
  const added = [];
  const removed = [];
  for (let i = 0; i < 10; i++) {
    const id = await create(srv.base);
    const a = performance.now();
    await page.waitForFunction((x) => !!document.querySelector(`[role=row][data-id="${x}"]`), { timeout: 20000, polling: 'raf' }, id);
    added.push(performance.now() - a);
    await close(srv.base, id);
    const b = performance.now();
    await page.waitForFunction((x) => !document.querySelector(`[role=row][data-id="${x}"]`), { timeout: 20000, polling: 'raf' }, id);
    removed.push(performance.now() - b);
  }
  result.row_added_ms = Math.round(median(added));
  result.row_removed_ms = Math.round(median(removed));
  result.untouched_rows_kept = await page.evaluate(() => window.__kept.isConnected);
  result.rows_after = await rowCount(page);
  result.longest_task_ms = Math.round(await page.evaluate(() => window.__longest));
  await page.close();
} finally {
  await browser.close();
  srv.stop();
}

if (opts.json) {
  console.log(JSON.stringify(result, null, 2));
} else {
  console.log(`Console live list with ${result.count} real sandboxes (native, bash), headless Chromium on loopback\n`);
  console.log('| measure | value |');
  console.log('|---|---|');
  console.log(`| create ${result.count} sandboxes (REST, 8 at a time) | ${result.create_all_s} s |`);
  console.log(`| server RSS with ${result.count} sandboxes | ${result.server_rss_mib} MiB |`);
  console.log(`| first render: navigation to ${result.count} rows | ${result.first_render_ms} ms |`);
  console.log(`| idle ${opts['idle-s']} s, no console open: server CPU | ${result.idle_no_console_cpu_pct}% of a core |`);
  console.log(`| idle ${opts['idle-s']} s, one console open: server CPU | ${result.idle_server_cpu_pct}% of a core |`);
  console.log(`| what the open console adds | ${result.console_cost_cpu_pct}% of a core (budget ≤ 1%) |`);
  console.log(`| idle ${opts['idle-s']} s: page main thread | ${result.idle_page_main_thread_pct}% |`);
  console.log(`| a created sandbox's row appears (median of 10) | ${result.row_added_ms} ms |`);
  console.log(`| a closed sandbox's row goes (median of 10) | ${result.row_removed_ms} ms |`);
  console.log(`| untouched rows kept (no reload) | ${result.untouched_rows_kept ? 'yes' : 'NO'} (${result.rows_after} rows after) |`);
  console.log(`| longest main-thread task | ${result.longest_task_ms} ms |`);
}
