#!/usr/bin/env node
// Round-trip benchmark over stdio: `ping` and `tools/list`, sandcastle against
// the official TypeScript SDK server (@modelcontextprotocol/server-everything),
// both driven by this one raw line-based client in the same run.
//
// Each round spawns both servers (order alternates between rounds), runs the
// legacy handshake (2025-06-18), then for each method: W warm-up round trips
// (discarded) and N timed sequential round trips. Per round we compute p50,
// p99 and round trips per second; the table shows the median over rounds.
//
// Usage: node bench/stdio_bench.mjs [--iterations 2000] [--warmup 200]
//          [--rounds 5] [--sandcastle build/sandcastle] [--json]
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');


const EVERYTHING_DIR = join(here, 'node_modules', '@modelcontextprotocol', 'server-everything');
const EVERYTHING = join(EVERYTHING_DIR, 'dist', 'index.js');
const everythingPackageVersion = () => JSON.parse(readFileSync(join(EVERYTHING_DIR, 'package.json'), 'utf8')).version;

function servers(opts) {
  return [
    { name: 'sandcastle', command: opts.sandcastle, args: ['--test-fixtures', '--log-level', 'warn'] },
    // The official SDK server, on the same Node that runs this driver.
    { name: 'server-everything', command: process.execPath, args: [EVERYTHING, 'stdio'] },
  ];
}

// The result of one request; a JSON-RPC error throws.
async function rpc(client, method, params) {
  const { msg } = await client.request(method, params);
  if (msg.error) throw new Error(`${method}: ${msg.error.code} ${msg.error.message}`);
  return msg.result;
}

function rssMiB(pid) {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

function percentile(sorted, p) {
  // Nearest-rank percentile.
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function measure(client, method, opts) {
  const params = method === 'tools/list' ? {} : undefined;
  for (let i = 0; i < opts.warmup; i++) await rpc(client, method, params);
  const lat = new Float64Array(opts.iterations);
  const start = process.hrtime.bigint();
  for (let i = 0; i < opts.iterations; i++) {
    const t0 = process.hrtime.bigint();
    await rpc(client, method, params);
    lat[i] = Number(process.hrtime.bigint() - t0) / 1000; // µs
  }
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  const sorted = Array.from(lat).sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    perSecond: opts.iterations / elapsedS,
    bytes: client.lastLineBytes,
  };
}

async function benchServer(server, opts) {
  const client = new LineClient(server.command, server.args);
  try {
    const init = await rpc(client, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'sandcastle-bench', version: '1.0.0' },
    });
    client.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const out = { serverInfo: init.serverInfo };
    for (const method of ['ping', 'tools/list']) out[method] = await measure(client, method, opts);
    out.tools = (await rpc(client, 'tools/list', {})).tools.length;
    out.rssMiB = rssMiB(client.proc.pid);
    return out;
  } finally {
    await client.close();
  }
}

const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'stdio_bench.mjs',
    defaults: { iterations: 2000, warmup: 200, rounds: 5, sandcastle: join(root, 'build', 'sandcastle-test-server'), json: false },
    types: { iterations: 'int', warmup: 'int0', rounds: 'int', sandcastle: 'path', json: 'flag' },
  });
  if (!existsSync(opts.sandcastle)) throw new Error(`sandcastle binary not found at ${opts.sandcastle} (make build)`);
  if (!existsSync(EVERYTHING)) throw new Error(`${EVERYTHING} missing: run npm ci in bench/ (scripts/install-deps does)`);
  const list = servers(opts);
  const rounds = Object.fromEntries(list.map((s) => [s.name, []]));
  for (let r = 0; r < opts.rounds; r++) {
    const order = r % 2 ? [...list].reverse() : list;
    for (const s of order) rounds[s.name].push(await benchServer(s, opts));
  }

  const summary = {};
  for (const s of list) {
    const rs = rounds[s.name];
    summary[s.name] = { version: rs[0].serverInfo?.version, tools: rs[0].tools, rssMiB: median(rs.map((x) => x.rssMiB)) };
    for (const m of ['ping', 'tools/list']) {
      summary[s.name][m] = {
        p50: median(rs.map((x) => x[m].p50)),
        p99: median(rs.map((x) => x[m].p99)),
        perSecond: median(rs.map((x) => x[m].perSecond)),
        bytes: rs[0][m].bytes,
      };
    }
  }
  if (opts.json) {
    console.log(JSON.stringify({ options: opts, node: process.version, summary, rounds }, null, 2));
    return;
  }

  const [a, b] = list.map((s) => s.name); // a = sandcastle, b = server-everything
  console.log(`### stdio round trips: sandcastle vs @modelcontextprotocol/server-everything`);
  console.log();
  console.log(`Sequential request → response over stdio, one driver for both servers (node ${process.version}).`);
  console.log(`${opts.iterations} timed iterations after ${opts.warmup} warm-up, ${opts.rounds} rounds; figures are the median over rounds.`);
  console.log(`sandcastle ${summary[a].version} --test-fixtures (${summary[a].tools} tools); @modelcontextprotocol/server-everything ${everythingPackageVersion()} (serverInfo ${summary[b].version}, ${summary[b].tools} tools).`);
  console.log();
  console.log('| method | server | p50 (µs) | p99 (µs) | msgs/s | response bytes |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const m of ['ping', 'tools/list']) {
    for (const s of [a, b]) {
      const x = summary[s][m];
      console.log(`| ${m} | ${s} | ${fmt(x.p50)} | ${fmt(x.p99)} | ${fmt(x.perSecond)} | ${x.bytes} |`);
    }
  }
  console.log();
  console.log('Ratio = server-everything / sandcastle (time), sandcastle / server-everything (msgs/s); > 1 means sandcastle is faster.');
  console.log();
  console.log('| method | p50 ratio | p99 ratio | msgs/s ratio |');
  console.log('|---|---:|---:|---:|');
  for (const m of ['ping', 'tools/list']) {
    const x = summary[a][m];
    const y = summary[b][m];
    console.log(`| ${m} | ${fmt(y.p50 / x.p50, 2)}× | ${fmt(y.p99 / x.p99, 2)}× | ${fmt(x.perSecond / y.perSecond, 2)}× |`);
  }
  console.log();
  console.log(`Server RSS after the run: sandcastle ${fmt(summary[a].rssMiB, 1)} MiB, server-everything ${fmt(summary[b].rssMiB, 1)} MiB.`);
}

main().catch((e) => {
  console.error(`stdio_bench: ${e.stack ?? e}`);
  process.exit(1);
});
