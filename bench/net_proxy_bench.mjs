#!/usr/bin/env node
// Allowlist proxy benchmark (issue 19), one run:
//   (a) GET of a 1 MiB body, each on a fresh connection, from a program in an
//       allowlist sandbox through the server's HTTP proxy (absolute-form, and
//       CONNECT then GET in the tunnel, the path https takes), against the
//       same program run on the host connecting directly. Two web servers,
//       both this machine's: one on the host's loopback (opened to the
//       sandbox by the operator setting network.private_allow), and, as root,
//       one in a network namespace of its own reached over a veth pair, as a
//       server on the local network is (203.0.113.250, a documentation
//       address; the namespace is made and removed by this script). The timed
//       loop runs inside one python3 process per side, so process start-up
//       is not in it. Medians and the ratio to direct (target <= 1.3).
//       A reference row: the same host program through bench/lib/tcp_relay.cc,
//       a bare relay (one thread, poll and copy, nothing decided), which is what
//       any user-space hop costs on this machine. Both sides run the same
//       interpreter (/usr/bin/python3, the sandbox's).
//   (b) 200 connections at once through one sandbox's proxy (CONNECT + GET of
//       the 1 MiB body each, from the loopback server): errors (target 0) and
//       wall time.
//
// Usage: node bench/net_proxy_bench.mjs [--sandcastle build/sandcastle] [--relay build/tcp_relay]
//          [--iterations 100] [--json]
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const opts = parseArgs(process.argv.slice(2), {
  script: 'net_proxy_bench.mjs',
  defaults: { sandcastle: resolve(root, 'build/sandcastle'), relay: null, iterations: 100, json: false },
  types: { sandcastle: 'path', relay: 'path', iterations: 'int', json: 'flag' },
});
opts.relay ??= join(dirname(opts.sandcastle), 'tcp_relay');
// The sandbox's interpreter is the host's /usr/bin/python3 (native backend).
const HOST_PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

const BODY = Buffer.alloc(1 << 20, 0x61);

// One python program for both sides: N fetches, each on a new connection,
// printing each duration in ms. mode: direct | absolute | connect | burst.
const CLIENT = String.raw`
import socket, sys, time, threading
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
want = 1 << 20
def fetch():
    if mode == 'direct':
        s = socket.create_connection((host, port))
        s.sendall(b'GET /big HTTP/1.0\r\nHost: %s:%d\r\n\r\n' % (host.encode(), port))
    else:
        s = socket.create_connection(('127.0.0.1', 3128))
        if mode == 'absolute':
            s.sendall(b'GET http://%s:%d/big HTTP/1.0\r\nHost: %s:%d\r\n\r\n' % (host.encode(), port, host.encode(), port))
        else:
            s.sendall(b'CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n' % (host.encode(), port, host.encode(), port))
            head = b''
            while b'\r\n\r\n' not in head:  # as curl reads it: a buffer, not a byte at a time
                c = s.recv(4096)
                if not c: raise OSError('proxy closed')
                head += c
            if b' 200 ' not in head.split(b'\r\n')[0] + b' ': raise OSError(head.decode())
            s.sendall(b'GET /big HTTP/1.0\r\nHost: %s:%d\r\n\r\n' % (host.encode(), port))
    got = 0
    buf = bytearray(1 << 16)
    while True:
        k = s.recv_into(buf)
        if k == 0: break
        got += k
    s.close()
    if got < want: raise OSError('short body: %d' % got)
if mode == 'burst':
    errors = []
    def one():
        try: fetch()
        except Exception as e: errors.append(repr(e))
    mode = 'connect'
    t0 = time.perf_counter()
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
    print('%.1f %d %s' % ((time.perf_counter() - t0) * 1000, len(errors), errors[:1]))
else:
    for _ in range(n):
        t0 = time.perf_counter(); fetch(); print('%.3f' % ((time.perf_counter() - t0) * 1000))
`;

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

// A web server in a network namespace of its own, on a veth pair from the
// host (as root): what a server on the local network is, without loopback's
// shortcut (both ends of a loopback connection run on the same core when
// the scheduler wakes one on the other's). Null without root.
const NETNS_ADDR = '203.0.113.250';
const HOST_ADDR = '203.0.113.249';
async function netnsWeb() {
  if (process.getuid() !== 0) return null;
  const ns = `scb-web-${process.pid}`;
  const veth = `scbw${process.pid % 100000}`;
  const ip = (...a) => execFileSync('ip', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  ip('netns', 'add', ns);
  const web = { ns, close: () => {} };
  try {
    ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
    ip('addr', 'add', `${HOST_ADDR}/30`, 'dev', veth);
    ip('link', 'set', veth, 'up');
    ip('-n', ns, 'addr', 'add', `${NETNS_ADDR}/30`, 'dev', 'eth0');
    ip('-n', ns, 'link', 'set', 'eth0', 'up');
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    const code = `const b = Buffer.alloc(1 << 20, 0x61);
      const s = require('node:http').createServer((q, r) => { r.writeHead(200, { 'Content-Length': b.length }); r.end(b); });
      s.listen(0, '${NETNS_ADDR}', () => console.log(s.address().port));`;
    const p = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    web.close = () => { p.kill(); };
    web.port = await new Promise((res, rej) => {
      p.stdout.once('data', (d) => res(Number(String(d).trim())));
      p.once('exit', (c) => rej(new Error(`netns web server exited: ${c}`)));
    });
    web.host = NETNS_ADDR;
    const close = web.close;
    web.close = () => { close(); try { ip('netns', 'del', ns); } catch { /* gone */ } };
    return web;
  } catch (e) {
    web.close();
    try { ip('netns', 'del', ns); } catch { /* gone */ }
    throw e;
  }
}

function startRelay(port, host) {
  const relay = spawn(opts.relay, ['--target', String(port), '--host', host], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    relay.stdout.once('data', (d) => res({ proc: relay, port: Number(String(d).trim()) }));
    relay.once('exit', (code) => rej(new Error(`tcp_relay exited: ${code}`)));
  });
}

async function main() {
  const web = createServer((req, res) => {
    res.writeHead(200, { 'Content-Length': BODY.length });
    res.end(BODY);
  });
  await new Promise((r) => web.listen(0, '127.0.0.1', r));
  const port = web.address().port;
  if (!existsSync(opts.relay)) throw new Error(`${opts.relay} not found: make bench builds it`);
  const remote = await netnsWeb();
  const servers = [{ what: 'loopback web server', host: '127.0.0.1', port }];
  if (remote) servers.push({ what: `web server in a network namespace of its own, over a veth pair (${NETNS_ADDR})`, host: remote.host, port: remote.port });
  const c = new LineClient(opts.sandcastle, ['--log-level', 'warn'], { SANDCASTLE_NETWORK_PRIVATE_ALLOW: '127.0.0.1/32' });
  await c.initialize('net-proxy-bench');
  const allow = servers.map((w) => `${w.host}/32:${w.port}`);
  const sb = (await c.callOk('create_sandbox', { language: 'python', network: { mode: 'allowlist', allow } })).sc;
  await c.callOk('write_file', { sandbox_id: sb.sandbox_id, path: 'client.py', content: CLIENT });
  const inSandbox = async (mode, w, n) => {
    const r = await c.callOk('execute_command', { sandbox_id: sb.sandbox_id, command: `python3 client.py ${mode} ${w.host} ${w.port} ${n}`, timeout_s: 600 });
    if (r.sc.exit_code !== 0) throw new Error(`${mode}: ${r.sc.stderr.slice(0, 500)}`);
    return r.sc.stdout.trim().split('\n');
  };
  const onHost = (mode, host, to, n) => {
    // Async spawn: the loopback web server lives in this process.
    return new Promise((resolveRun, reject) => {
      const p = spawn(HOST_PYTHON, ['-c', CLIENT, mode, host, String(to), String(n)]);
      let out = '';
      p.stdout.on('data', (d) => { out += d; });
      p.on('close', (code) => (code === 0 ? resolveRun(out.trim().split('\n')) : reject(new Error(`host ${mode}: ${code}`))));
    });
  };
  const n = opts.iterations;
  const results = [];
  const relays = [];
  try {
    for (const w of servers) {
      const relay = await startRelay(w.port, w.host);
      relays.push(relay.proc);
      // Interleaved in rounds of 10, so load on the machine hits both sides.
      const times = { direct: [], relay: [], absolute: [], connect: [] };
      for (let done = 0; done < n; done += 10) {
        times.direct.push(...(await onHost('direct', w.host, w.port, 10)).map(Number));
        times.relay.push(...(await onHost('direct', '127.0.0.1', relay.port, 10)).map(Number));
        times.absolute.push(...(await inSandbox('absolute', w, 10)).map(Number));
        times.connect.push(...(await inSandbox('connect', w, 10)).map(Number));
      }
      const d = median(times.direct);
      results.push({ server: w.what, rows: [
        ['direct from the host (no proxy)', d, 1],
        ['reference: the host through a bare relay (bench/lib/tcp_relay.cc)', median(times.relay), median(times.relay) / d],
        ['through the proxy, absolute-form GET', median(times.absolute), median(times.absolute) / d],
        ['through the proxy, CONNECT tunnel', median(times.connect), median(times.connect) / d],
      ] });
    }
    const [burst] = await inSandbox('burst', servers[0], 200);
    const [wall, errors] = burst.split(' ');
    if (opts.json) {
      console.log(JSON.stringify({ iterations: n, results, burst: { connections: 200, wall_ms: Number(wall), errors: Number(errors) } }));
    } else {
      for (const r of results) {
        console.log(`1 MiB GET on a fresh connection, median of ${n} (ms), ${r.server}:\n`);
        // The proxy's own share: its time over the bare relay's.
        const relayMs = r.rows[1][1];
        console.log('| path | median ms | ratio to direct | ratio to the bare relay |');
        console.log('| --- | --- | --- | --- |');
        for (const [what, ms, ratio] of r.rows) console.log(`| ${what} | ${ms.toFixed(2)} | ${ratio.toFixed(2)}× | ${(ms / relayMs).toFixed(2)}× |`);
        console.log('');
      }
      if (!remote) console.log('(not root: no network namespace for the second web server)\n');
      console.log(`200 concurrent CONNECT + 1 MiB GET through one sandbox's proxy: ${errors} errors, ${Number(wall).toFixed(0)} ms wall`);
    }
    if (Number(errors) !== 0) process.exitCode = 1;
    await c.callOk('close_sandbox', { sandbox_id: sb.sandbox_id });
  } finally {
    c.proc.kill();
    for (const r of relays) r.kill();
    web.close();
    remote?.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
