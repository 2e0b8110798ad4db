#!/usr/bin/env node
// File-tool benchmark over stdio (issue 13: sandbox file I/O moves from the
// server into the sandbox). For one sandbox per server it measures, p50 and
// p99 over a fixed number of calls:
//   - `ping`, the floor of any round trip;
//   - `write_file` and `read_file` of 4 KiB of text (target: p50 <= 1.5x today's);
//   - `write_file` and `read_file` of 64 MiB, base64 (target: p50 <= 1.2x
//     today's). A server caps one call (today 32 MiB of content); the bench
//     asks each server for the whole file first, reads the cap from its
//     refusal, and moves the file in as many calls as the smaller cap of the
//     servers in the run allows, the same calls for both. A row's time is
//     the whole file: the sum of its calls. Split writes go to part files, and
//     the file read is their concatenation (made by a command, untimed);
//   - `list_files` of /workspace holding --files files (1,000);
//   - one-shot `execute_code` of `print(1)` and a warm kernel's `x += 1`
//     (target: unchanged).
// With --baseline-bin PATH a second server (today's binary) runs beside the
// first: every measure alternates between the two, call by call, in the same
// run (so drift hits both), and each row shows the ratio sandcastle/baseline.
// Run it with --baseline-bin naming the same binary to see this machine's
// noise in the ratios.
//
// The client is the raw line-based JSON-RPC driver of the other benches. The
// large requests are serialised before the clock starts, and a round trip
// ends when the response's last byte arrives (before the client parses it),
// so the figures are the server's and the pipe's, not Node's JSON work.
//
// Usage: node bench/files_bench.mjs [--sandcastle build/sandcastle]
//          [--baseline-bin PATH] [--iterations 200] [--big 8] [--big-mib 64]
//          [--files 1000] [--oneshot 60] [--json]
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const MiB = 1024 * 1024;
// Both servers must accept one message carrying the largest file base64'd,
// twice over in a response (content text and structuredContent).
const MAX_MESSAGE = 1024 * MiB;
// "Unchanged": a ratio within this band is taken as noise on this machine
// (check it with an A/A run: --baseline-bin naming the same binary).
const NOISE = 1.1;

// ---- statistics
const sorted = (xs) => [...xs].sort((a, b) => a - b);
function pct(xs, p) {
  const s = sorted(xs);
  if (!s.length) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
const stats = (xs) => ({ n: xs.length, p50: pct(xs, 50), p99: pct(xs, 99), min: pct(xs, 0), max: pct(xs, 100) });
// Each target's stats; with two targets also the median of the ratios of
// calls made one after the other (pairs), which drift on a busy machine
// disturbs less than the ratio of the two p50s.
function summary(samples) {
  const s = { ...samples.map(stats) };  // "0": sandcastle, "1": baseline
  if (samples.length === 2) s.paired = pct(samples[0].map((x, i) => x / samples[1][i]), 50);
  return s;
}
const ms = (x) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(3)) : 'n/a');
const ratio = (a, b) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : 'n/a');
const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

// ---- one server under test
class Target {
  constructor(label, bin) {
    this.label = label;
    this.bin = bin;
  }

  async start() {
    this.c = new LineClient(this.bin, ['--log-level', 'warn', '--max-message-bytes', String(MAX_MESSAGE)]);
    await this.c.initialize('files-bench');
    // Limits well above the files moved, so no limit shapes the figures
    // (once writes happen inside the sandbox, its memory holds the tmpfs pages).
    const fs = await this.c.callOk('create_sandbox', { limits: { memory_mb: 2048, disk_mb: 2048 } });
    this.files = fs.sc.sandbox_id;
    const ks = await this.c.callOk('create_sandbox', { language: 'python' });
    this.kernel = ks.sc.sandbox_id;
    await this.c.callOk('execute_code', { sandbox_id: this.kernel, code: 'x = 0' });
  }

  async sh(command) {
    const r = await this.c.callOk('execute_command', { sandbox_id: this.files, command });
    if (r.sc.exit_code !== 0) throw new Error(`${this.label}: \`${command}\` exited ${r.sc.exit_code}: ${r.sc.stderr}`);
    return r;
  }

  // tools/call from a request serialised beforehand; the time excludes that.
  async prepared(name, args) {
    const send = this.c.prepare('tools/call', { name, arguments: args });
    const { msg, t, sent, bytes } = await send();
    return { ...this.c.result(name, msg, t), sent, bytes };
  }

  peakRssKib() {
    try {
      return Number(readFileSync(`/proc/${this.c.proc.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1]);
    } catch { return NaN; }
  }
}

// Runs `op` for every target, `n` times, alternating which goes first;
// returns each target's samples (ms).
async function alternate(targets, n, op) {
  const out = targets.map(() => []);
  for (let i = 0; i < n; i++) {
    const order = i % 2 ? targets.map((_, k) => targets.length - 1 - k) : targets.map((_, k) => k);
    for (const k of order) out[k].push(await op(targets[k], i));
  }
  return out;
}

const errorText = (res) => res.r.content?.[0]?.text ?? JSON.stringify(res.r);
function okOrThrow(res, what) {
  if (res.isError) throw new Error(`${what}: ${errorText(res).slice(0, 300)}`);
  return res;
}

// The largest call a server accepts, starting from `size` bytes: its
// refusal names the cap (today "the 33554432-byte limit of one write", "one
// read returns at most 33554432 bytes"), taken as the largest number in it
// below the size asked; a refusal without one halves the size.
async function probeCap(what, size, attempt) {
  let n = size;
  for (;;) {
    let res;
    try {
      res = await attempt(n);
    } catch (e) {  // a JSON-RPC error (e.g. a message-size limit) counts as a refusal
      res = { isError: true, r: { content: [{ text: String(e.message) }] } };
    }
    if (!res.isError) return n;
    const text = errorText(res);
    const named = (text.match(/\d+/g) ?? []).map(Number).filter((v) => v >= MiB && v < n);
    const next = named.length ? Math.max(...named) : Math.floor(n / 2);
    if (next < MiB) throw new Error(`${what}: refused even ${n} bytes: ${text.slice(0, 300)}`);
    n = next;
  }
}

async function benchFiles(targets, opts) {
  const out = {};
  const rows = (key, samples) => { out[key] = summary(samples); };

  // ping: the floor of a round trip.
  rows('ping', await alternate(targets, opts.iterations, async (t) => (await t.c.request('ping', {})).t));

  // list_files of /workspace holding opts.files files.
  for (const t of targets) {
    await t.c.callOk('execute_code', {
      sandbox_id: t.files,
      code: `for i in range(${opts.files}):\n    open(f"/workspace/lf_{i:05d}.txt", "w").write("x" * 100)\n`,
    });
  }
  const list = async (t) => {
    const r = await t.c.callOk('list_files', { sandbox_id: t.files, path: '/workspace' });
    if (r.sc.files.length !== opts.files) throw new Error(`${t.label}: list_files gave ${r.sc.files.length} files, not ${opts.files}`);
    return r.t;
  };
  await alternate(targets, 5, list);
  rows('list', await alternate(targets, opts.iterations, list));
  for (const t of targets) await t.sh('rm -f /workspace/lf_*.txt');

  // 4 KiB of text, written then read back.
  const small = 'sandcastle files_bench 4 KiB line of text.\n'.repeat(100).padEnd(4096, '.').slice(0, 4096);
  const w4 = async (t) => okOrThrow(await t.c.call('write_file', { sandbox_id: t.files, path: 'small.txt', content: small }), 'write_file 4 KiB').t;
  const r4 = async (t) => {
    const r = okOrThrow(await t.c.call('read_file', { sandbox_id: t.files, path: 'small.txt' }), 'read_file 4 KiB');
    if (r.sc.content !== small) throw new Error(`${t.label}: read_file 4 KiB returned other content`);
    return r.t;
  };
  for (let i = 0; i < 10; i++) for (const t of targets) { await w4(t); await r4(t); }
  const w4s = targets.map(() => []), r4s = targets.map(() => []);
  await alternate(targets, opts.iterations, async (t) => {
    const k = targets.indexOf(t);
    w4s[k].push(await w4(t));
    r4s[k].push(await r4(t));
  });
  rows('write4k', w4s);
  rows('read4k', r4s);

  // The large file, base64 over MCP.
  const size = opts['big-mib'] * MiB;
  const data = randomBytes(size);
  const writeCaps = [];
  for (const t of targets) {
    writeCaps.push(await probeCap(`${t.label} write_file`, size, (n) =>
      t.prepared('write_file', { sandbox_id: t.files, path: 'big.probe', content: data.subarray(0, n).toString('base64'), encoding: 'base64' })));
    await t.sh('rm -f /workspace/big.probe');
  }
  const wChunk = Math.min(...writeCaps);
  const wCalls = Math.ceil(size / wChunk);
  const partName = (i) => (wCalls === 1 ? 'big.bin' : `big.part${String(i).padStart(4, '0')}`);
  // Each call's request is serialised beforehand (untimed); the row is the sum.
  const writeBig = async (t) => {
    let total = 0, sent = 0;
    for (let i = 0; i < wCalls; i++) {
      const content = data.subarray(i * wChunk, Math.min(size, (i + 1) * wChunk)).toString('base64');
      const send = t.c.prepare('tools/call', { name: 'write_file', arguments: { sandbox_id: t.files, path: partName(i), content, encoding: 'base64' } });
      const r = await send();
      okOrThrow(t.c.result('write_file', r.msg, r.t), `write_file ${partName(i)}`);
      total += r.t;
      sent = Math.max(sent, r.sent);
    }
    t.writeSent = sent;
    return total;
  };
  for (const t of targets) {
    await writeBig(t);  // warm-up; it also makes the file to read
    if (wCalls > 1) await t.sh('cat big.part* > big.bin');
  }
  const readCaps = [];
  for (const t of targets) {
    readCaps.push(await probeCap(`${t.label} read_file`, size, (n) =>
      t.prepared('read_file', { sandbox_id: t.files, path: 'big.bin', encoding: 'base64', offset: 0, length: n })));
  }
  const rChunk = Math.min(...readCaps);
  const rCalls = Math.ceil(size / rChunk);
  const readBig = async (t, verify) => {
    let total = 0, got = 0;
    for (let i = 0; i < rCalls; i++) {
      const offset = i * rChunk;
      const r = okOrThrow(await t.prepared('read_file', { sandbox_id: t.files, path: 'big.bin', encoding: 'base64', offset, length: rChunk }),
        `read_file big.bin at ${offset}`);
      total += r.t;
      t.readBytes = Math.max(t.readBytes ?? 0, r.bytes);
      if (verify && !Buffer.from(r.sc.content, 'base64').equals(data.subarray(offset, offset + rChunk)))
        throw new Error(`${t.label}: read_file big.bin at ${offset} returned other bytes`);
      got += r.sc.length ?? Buffer.byteLength(r.sc.content, 'base64');
    }
    if (got !== size) throw new Error(`${t.label}: read ${got} bytes of big.bin, not ${size}`);
    return total;
  };
  for (const t of targets) await readBig(t, true);  // warm-up, and the content checked once
  const wb = targets.map(() => []), rb = targets.map(() => []);
  await alternate(targets, opts.big, async (t) => {
    const k = targets.indexOf(t);
    wb[k].push(await writeBig(t));
    rb[k].push(await readBig(t, false));
  });
  rows('writeBig', wb);
  rows('readBig', rb);
  out.big = { size, wChunk, wCalls, rChunk, rCalls, writeCaps, readCaps,
    writeSent: targets.map((t) => t.writeSent), readBytes: targets.map((t) => t.readBytes) };
  for (const t of targets) await t.sh('rm -f big.bin big.part*');
  return out;
}

async function benchExec(targets, opts) {
  const out = {};
  const oneShot = async (t) => {
    const r = await t.c.callOk('execute_code', { code: 'print(1)' });
    if (r.sc.stdout !== '1\n' || r.sc.exit_code !== 0) throw new Error(`${t.label}: one-shot gave ${JSON.stringify(r.sc).slice(0, 300)}`);
    return r.t;
  };
  await alternate(targets, 5, oneShot);
  out.oneshot = summary(await alternate(targets, opts.oneshot, oneShot));
  const cell = async (t) => (await t.c.callOk('execute_code', { sandbox_id: t.kernel, code: 'x += 1' })).t;
  await alternate(targets, 100, cell);
  out.cell = summary(await alternate(targets, opts.iterations, cell));
  return out;
}

function loadavg() { return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '); }

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'files_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), 'baseline-bin': '', iterations: 200, big: 8, 'big-mib': 64,
      files: 1000, oneshot: 60, json: false },
    types: { sandcastle: 'path', 'baseline-bin': 'path', iterations: 'int', big: 'int', 'big-mib': 'int', files: 'int',
      oneshot: 'int', json: 'flag' },
  });
  for (const b of [opts.sandcastle, opts['baseline-bin']].filter(Boolean))
    if (!existsSync(b)) throw new Error(`${b} not found; build it first`);
  const targets = [new Target('sandcastle', opts.sandcastle)];
  if (opts['baseline-bin']) targets.push(new Target('baseline', opts['baseline-bin']));
  const load0 = loadavg();
  for (const t of targets) await t.start();
  let f, x;
  try {
    f = await benchFiles(targets, opts);
    x = await benchExec(targets, opts);
  } catch (e) {
    for (const t of targets) if (t.c.stderr) console.error(`${t.label} stderr: ${t.c.stderr.slice(-2000)}`);
    throw e;
  }
  const peak = targets.map((t) => t.peakRssKib());
  for (const t of targets) await t.c.close();
  const load1 = loadavg();

  if (opts.json) {
    console.log(JSON.stringify({ binaries: targets.map((t) => t.bin), targets: targets.map((t) => t.label), load: [load0, load1], ...f, ...x,
      peak_rss_kib: peak }, null, 2));
    return;
  }
  const two = targets.length === 2;
  const pass = (ok) => (ok ? 'met' : '**missed**');
  const b = f.big;
  const mibs = (bytes, t) => `${((bytes / MiB) / (t / 1000)).toFixed(0)} MiB/s`;
  const lines = [
    `sandcastle file tools over stdio (raw JSON-RPC client): ${opts.iterations} calls per small row, ${opts.big} per ` +
      `${opts['big-mib']} MiB row, ${opts.oneshot} one-shots; p50 / p99 in ms` +
      (two ? `; sandcastle (${opts.sandcastle}) and baseline (${opts['baseline-bin']}) alternate call by call` : '') +
      `. Load average before: ${load0}, after: ${load1}.`,
    `${opts['big-mib']} MiB moves in ${b.wCalls} write_file call(s) of ≤ ${b.wChunk / MiB} MiB and ${b.rCalls} ` +
      `read_file call(s) of ≤ ${b.rChunk / MiB} MiB (one call's cap: write ${b.writeCaps.map((c) => `${c / MiB} MiB`).join(' / ')}, ` +
      `read ${b.readCaps.map((c) => `${c / MiB} MiB`).join(' / ')}${two ? ' (sandcastle / baseline)' : ''}); ` +
      `largest write request ${b.writeSent.map(mb).join(' / ')}, largest read response ${b.readBytes.map(mb).join(' / ')}.`,
    '',
    two ? '| measure | sandcastle p50 / p99 | baseline p50 / p99 | ratio p50 / p99 | paired ratio | target (on the p50 ratio) |'
      : '| measure | p50 / p99 (min–max) | target |',
    two ? '|---|---:|---:|---:|---:|---|' : '|---|---:|---|',
  ];
  const row = (label, s, target, extra = () => '') => {
    const cell = (v) => `${ms(v.p50)} / ${ms(v.p99)}${extra(v)}`;
    if (!two) {
      lines.push(`| ${label} | ${cell(s[0])} (${ms(s[0].min)}–${ms(s[0].max)}) | ${target ? `${target.text} (needs --baseline-bin)` : ''} |`);
      return;
    }
    const r50 = s[0].p50 / s[1].p50;
    lines.push(`| ${label} | ${cell(s[0])} | ${cell(s[1])} | ${ratio(s[0].p50, s[1].p50)} / ${ratio(s[0].p99, s[1].p99)} | ` +
      `${s.paired.toFixed(2)}× | ` +
      `${target ? `${target.text} ${pass(r50 <= target.max)}` : ''} |`);
  };
  const thr = (v) => ` (${mibs(b.size, v.p50)} at p50)`;
  row('`ping` (floor of a round trip)', f.ping);
  row('`write_file` 4 KiB text', f.write4k, { text: 'p50 ≤ 1.5×', max: 1.5 });
  row('`read_file` 4 KiB text', f.read4k, { text: 'p50 ≤ 1.5×', max: 1.5 });
  row(`\`write_file\` ${opts['big-mib']} MiB base64 (${b.wCalls} call${b.wCalls > 1 ? 's' : ''})`, f.writeBig, { text: 'p50 ≤ 1.2×', max: 1.2 }, thr);
  row(`\`read_file\` ${opts['big-mib']} MiB base64 (${b.rCalls} call${b.rCalls > 1 ? 's' : ''})`, f.readBig, { text: 'p50 ≤ 1.2×', max: 1.2 }, thr);
  row(`\`list_files\` /workspace, ${opts.files} files`, f.list);
  row('one-shot `execute_code` print(1)', x.oneshot, { text: `unchanged (≤ ${NOISE}×)`, max: NOISE });
  row('warm kernel `execute_code` x += 1', x.cell, { text: `unchanged (≤ ${NOISE}×)`, max: NOISE });
  lines.push(two
    ? `| server peak RSS (VmHWM) after the run | ${(peak[0] / 1024).toFixed(0)} MiB | ${(peak[1] / 1024).toFixed(0)} MiB | ${ratio(peak[0], peak[1])} | | |`
    : `| server peak RSS (VmHWM) after the run | ${(peak[0] / 1024).toFixed(0)} MiB | |`);
  console.log(lines.join('\n'));
}

main().catch((e) => {
  console.error(`files_bench: ${e.stack ?? e}`);
  process.exit(1);
});
