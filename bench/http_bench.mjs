#!/usr/bin/env node
// HTTP benchmark: sandcastle's Streamable HTTP transport against the official
// TypeScript SDK server (@modelcontextprotocol/server-everything, mode
// streamableHttp), both driven by this one load generator in the same run.
//
// For each server and each concurrency C in {1, 16, 200}: C clients, each with
// its own legacy session (2025-06-18) on its own keep-alive connection, send
// requests back to back until N requests are done; measured: requests per
// second, p50 and p99 latency, errors (HTTP status != 200 or a JSON-RPC
// error). Methods: tools/list and a trivial tools/call (sandcastle: test_echo,
// server-everything: echo). Then: memory (RSS) and threads of each server
// with 1,000 idle SSE streams open.
//
// The load comes from bench/lib/http_load.cc (one thread, epoll), built next
// to the sandcastle binary by `make bench`.
//
// Usage: node bench/http_bench.mjs [--sandcastle build/sandcastle] [--loader build/http_load]
//          [--requests 10000] [--streams 1000] [--json]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');


const EVERYTHING_DIR = [join(here, 'node_modules', '@modelcontextprotocol', 'server-everything'),
  join(root, 'tests', 'e2e', 'node_modules', '@modelcontextprotocol', 'server-everything')].find((d) => existsSync(d));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  const srv = http.createServer();
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

async function startSandcastle(bin) {
  const proc = spawn(bin, ['--transport', 'http', '--port', '0', '--test-fixtures', '--pool-size', '0',
    '--log-level', 'error', '--state-dir', join('/tmp', `sandcastle-bench-${process.pid}`)],
  { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const base = await new Promise((res, rej) => {
    proc.stderr.on('data', (c) => {
      err += c;
      const m = err.match(/listening on (http:\/\/[^\s/]+)\/mcp/);
      if (m) res(m[1]);
    });
    proc.on('exit', (code) => rej(new Error(`sandcastle exited ${code}: ${err}`)));
  });
  return { name: 'sandcastle', proc, url: `${base}/mcp`, call: { name: 'test_echo', arguments: { text: 'hi' } } };
}

async function startEverything() {
  const port = await freePort();
  const proc = spawn(process.execPath, [join(EVERYTHING_DIR, 'dist', 'index.js'), 'streamableHttp'],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PORT: String(port) } });
  let err = '';
  await new Promise((res, rej) => {
    proc.stderr.on('data', (c) => { err += c; if (/listening on port/.test(err)) res(); });
    proc.on('exit', (code) => rej(new Error(`server-everything exited ${code}: ${err}`)));
  });
  const version = JSON.parse(readFileSync(join(EVERYTHING_DIR, 'package.json'), 'utf8')).version;
  return { name: `server-everything ${version}`, proc, url: `http://127.0.0.1:${port}/mcp`,
    call: { name: 'echo', arguments: { message: 'hi' } } };
}

// One POST on `agent`; resolves {status, headers, body}.
function request(agent, url, body, headers) {
  return new Promise((resolveReq, reject) => {
    const u = new URL(url);
    const data = JSON.stringify(body);
    const req = http.request({ agent, host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
        'content-length': Buffer.byteLength(data), ...headers } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolveReq({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function openSession(agent, url) {
  const init = await request(agent, url, { jsonrpc: '2.0', id: 0, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'http-bench', version: '1' } } }, {});
  const sid = init.headers['mcp-session-id'];
  if (init.status !== 200 || !sid) throw new Error(`initialize: ${init.status} ${init.body}`);
  const headers = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' };
  await request(agent, url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return headers;
}

// C clients, each with its own legacy session on its own keep-alive
// connection, through bench/lib/http_load.cc (built as $BUILD/http_load):
// the generator's cost stays small beside the servers' on a 2-core machine.
function load(server, method, concurrency, total, loader) {
  const params = method === 'tools/call' ? server.call : {};
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  const port = new URL(server.url).port;
  const args = ['--port', port, '--clients', String(concurrency), '--requests', String(total),
    '--body', body, '--session', '2025-06-18', '--warmup', '3'];
  if (method === 'tools/call') args.push('--tool-call');
  const r = spawnSync(loader, args, { encoding: 'utf8', timeout: 300000 });
  if (r.status !== 0) throw new Error(`http_load ${method} c=${concurrency}: ${r.stderr || r.error}`);
  const j = JSON.parse(r.stdout);
  return { rps: j.rps, p50: j.p50_ms, p99: j.p99_ms, errors: j.errors, requests: j.requests, bytes: j.bytes,
    firstError: j.first_error };
}

function procStatus(pid) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(s.match(/VmRSS:\s+(\d+)/)[1]) / 1024;
  const threads = Number(s.match(/Threads:\s+(\d+)/)[1]);
  return { rss, threads };
}

// Opens `n` sessions, each with a standalone GET SSE stream, and measures the server.
async function idleStreams(server, n) {
  const before = procStatus(server.proc.pid);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const reqs = [];
  let open = 0;
  for (let i = 0; i < n; i++) {
    const h = await openSession(agent, server.url);
    await new Promise((res, rej) => {
      const u = new URL(server.url);
      const req = http.request({ agent: false, host: u.hostname, port: u.port, path: u.pathname, method: 'GET',
        headers: { ...h, accept: 'text/event-stream' } }, (r) => {
        if (r.statusCode === 200) open++;
        r.on('data', () => {});
        r.on('error', () => {});
        res();
      });
      req.on('error', rej);
      req.end();
      reqs.push(req);
    });
  }
  await sleep(1000);
  const after = procStatus(server.proc.pid);
  for (const r of reqs) r.destroy();
  agent.destroy();
  return { open, rssBefore: before.rss, rssAfter: after.rss, threads: after.threads,
    perStreamKiB: ((after.rss - before.rss) * 1024) / Math.max(1, open) };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'http_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle-test-server'), loader: null, requests: 10000, streams: 1000, json: false, concurrency: [1, 16, 200] },
    types: { sandcastle: 'path', loader: 'path', requests: 'int', streams: 'int', concurrency: 'list', json: 'flag' },
  });
  if (!existsSync(opts.sandcastle)) throw new Error(`${opts.sandcastle} not found`);
  opts.loader ??= join(dirname(opts.sandcastle), 'http_load');
  if (!existsSync(opts.loader)) throw new Error(`${opts.loader} not found: make bench builds it`);
  if (!EVERYTHING_DIR) throw new Error('server-everything missing: run scripts/install-deps');
  const results = [];
  const memory = [];
  for (const start of [() => startSandcastle(opts.sandcastle), startEverything]) {
    const server = await start();
    try {
      for (const method of ['tools/list', 'tools/call']) {
        for (const c of opts.concurrency) {
          const n = c === 1 ? Math.min(2000, opts.requests) : opts.requests;
          const r = load(server, method, c, n, opts.loader);
          results.push({ server: server.name, method, concurrency: c, ...r });
          if (!opts.json) console.error(`${server.name} ${method} c=${c}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.errors} errors${r.firstError ? ` (first: ${r.firstError.slice(0, 200)})` : ''}`);
        }
      }
      memory.push({ server: server.name, ...(await idleStreams(server, opts.streams)) });
    } finally {
      server.proc.kill('SIGTERM');
      await sleep(200);
    }
  }
  if (opts.json) {
    console.log(JSON.stringify({ results, memory }, null, 2));
    return;
  }
  const sc = (m, c) => results.find((r) => r.server === 'sandcastle' && r.method === m && r.concurrency === c);
  const ev = (m, c) => results.find((r) => r.server !== 'sandcastle' && r.method === m && r.concurrency === c);
  console.log('| method | clients | sandcastle req/s | p50 ms | p99 ms | errors | server-everything req/s | p50 ms | p99 ms | errors | ratio |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  const size = (m) => `${m}: sandcastle ${sc(m, opts.concurrency[0]).bytes} B, server-everything ${ev(m, opts.concurrency[0]).bytes} B per response`;
  for (const m of ['tools/list', 'tools/call']) {
    for (const c of opts.concurrency) {
      const a = sc(m, c), b = ev(m, c);
      console.log(`| ${m} | ${c} | ${a.rps.toFixed(0)} | ${a.p50.toFixed(2)} | ${a.p99.toFixed(2)} | ${a.errors}/${a.requests} | ${b.rps.toFixed(0)} | ${b.p50.toFixed(2)} | ${b.p99.toFixed(2)} | ${b.errors}/${b.requests} | ${(a.rps / b.rps).toFixed(1)}× |`);
    }
  }
  console.log();
  console.log(`Response sizes: ${size('tools/list')}; ${size('tools/call')}.`);
  console.log();
  console.log(`| server | idle SSE streams open | RSS before | RSS after | per stream | threads |`);
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const m of memory)
    console.log(`| ${m.server} | ${m.open} | ${m.rssBefore.toFixed(1)} MiB | ${m.rssAfter.toFixed(1)} MiB | ${m.perStreamKiB.toFixed(1)} KiB | ${m.threads} |`);
}

main().catch((e) => { console.error(e); process.exit(1); });
