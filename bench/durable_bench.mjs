// Durable sandboxes (issue 16): pause+resume and fork, over stdio, medians.
//   - pause+resume of an idle Python kernel sandbox: mode freeze (memory kept)
//     and mode stop (persistent: processes end, files kept), each timed from
//     the pause call to the resume's answer, and to the first x += 1 after it;
//     beside it `podman container checkpoint` + `restore` of a container
//     running python3, when CRIU works on this host (the row says why not).
//   - fork_sandbox of a sandbox holding --mib MiB of files (persistent: the
//     disk image copied; ephemeral: file by file through the sandbox), beside
//     `cp -a` of the same bytes on the state dir's disk. The persistent fork
//     with where its time goes (the server's debug log: loop device, freeze,
//     copy, mount, start), and with --baseline-bin (a sandcastle built from
//     an earlier commit) the same fork on it, interleaved round by round.
// Needs root for persistent sandboxes; prints why not otherwise.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/durable_bench.mjs',
  defaults: { sandcastle: 'build/sandcastle', rounds: 9, mib: 50 },
  types: { sandcastle: 'path', rounds: 'int', mib: 'int', 'baseline-bin': 'path' },
});

if (process.getuid() !== 0) {
  console.log('durable_bench: skipped (persistent sandboxes need root: loop-mounted disks)');
  process.exit(0);
}

const median = (v) => { const s = [...v].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const ms = (v) => (v === undefined ? 'n/a' : `${v.toFixed(v < 10 ? 2 : 1)} ms`);
const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }).toString();
const timed = async (fn) => { const t0 = performance.now(); await fn(); return performance.now() - t0; };

function criuReason() {
  try {
    sh('criu', ['check']);
    return null;
  } catch (e) {
    const text = `${e.stdout ?? ''}${e.stderr ?? ''}`.split('\n').find((l) => /Error/.test(l)) ?? e.message;
    return text.trim();
  }
}

const work = mkdtempSync('/tmp/scdb-');
let client;
try {
  client = new LineClient(opts.sandcastle, ['--state-dir', join(work, 'state'), '--log-level', 'debug']);
  await client.initialize('durable-bench');
  // The fork's steps, from the server's debug log.
  const steps = { freeze: [], copy: [], mount: [], start: [], server: [] };
  let partial = '';
  client.proc.stderr.on('data', (d) => {
    const lines = (partial + d).split('\n');
    partial = lines.pop();
    for (const l of lines) {
      let m = l.match(/copy \S+ -> \S+: frozen \(copied meanwhile\) ([\d.]+) ms, changed pages ([\d.]+) ms/);
      if (m) { steps.freeze.push(+m[1]); steps.copy.push(+m[2]); }
      m = l.match(/storage \S+: mounted in ([\d.]+) ms, (?:a warm sandbox took it|started) in ([\d.]+) ms/);
      if (m) { steps.mount.push(+m[1]); steps.start.push(+m[2]); }
      m = l.match(/fork \S+ -> \S+: storage copied in ([\d.]+) ms, started in ([\d.]+) ms/);
      if (m) steps.server.push(+m[1] + +m[2]);
    }
  });
  const call = (name, args) => client.callOk(name, args);
  const rows = [];

  // pause+resume, both modes.
  for (const [mode, persistent] of [['freeze', false], ['stop', true]]) {
    const { sc } = await call('create_sandbox', { language: 'python', persistent });
    const id = sc.sandbox_id;
    await call('execute_code', { sandbox_id: id, code: 'x = 0' });
    const both = [], first = [];
    for (let i = 0; i < opts.rounds; i++) {
      const t0 = performance.now();
      await call('pause_sandbox', { sandbox_id: id, mode });
      await call('resume_sandbox', { sandbox_id: id });
      both.push(performance.now() - t0);
      const r = await call('execute_code', { sandbox_id: id, code: mode === 'freeze' ? 'x += 1\nprint(x)' : 'print(1)' });
      first.push(performance.now() - t0);
      if (mode === 'freeze' && r.sc.stdout !== `${i + 1}\n`) throw new Error(`state lost in freeze mode: ${JSON.stringify(r.sc)}`);
    }
    rows.push([`pause+resume, mode ${mode}${persistent ? ' (persistent)' : ''}`, ms(median(both)), ms(median(first))]);
    await call('close_sandbox', { sandbox_id: id });
  }
  const criu = criuReason();
  rows.push(['podman container checkpoint + restore (python3)', criu ? `unavailable: ${criu}` : 'criu works here: not yet measured', '']);

  // fork of a sandbox holding --mib MiB.
  // Two halves: an ephemeral fork copies files of up to 32 MiB each.
  const half = (opts.mib << 20) >> 1;
  const fill = `head -c ${half} /dev/urandom > data1.bin && head -c ${half} /dev/urandom > data2.bin && ` +
    'mkdir -p src && for i in $(seq 1 200); do echo $i > src/f$i.txt; done';
  const load0 = loadavg()[0];
  let base;
  if (opts['baseline-bin']) {
    base = new LineClient(opts['baseline-bin'], ['--state-dir', join(work, 'state-base')]);
    await base.initialize('durable-bench-baseline');
  }
  try {
    for (const persistent of [true, false]) {
      const servers = persistent && base ? [client, base] : [client];
      const sources = [];
      for (const c of servers) {
        const { sc } = await c.callOk('create_sandbox', { language: 'bash', persistent, limits: { disk_mb: 4 * opts.mib } });
        await c.callOk('execute_command', { sandbox_id: sc.sandbox_id, command: fill });
        sources.push(sc.sandbox_id);
      }
      for (const k of Object.keys(steps)) steps[k].length = 0;
      const t = servers.map(() => []);
      for (let i = 0; i < opts.rounds; i++) {
        // Interleaved: each round forks on every server in turn.
        for (let s = 0; s < servers.length; s++) {
          let child;
          t[s].push(await timed(async () => { child = (await servers[s].callOk('fork_sandbox', { sandbox_id: sources[s] })).sc.sandbox_id; }));
          await servers[s].callOk('close_sandbox', { sandbox_id: child });
        }
      }
      const what = `fork_sandbox, ${opts.mib} MiB (2 files) + 200 small files`;
      rows.push([`${what}, ${persistent ? 'persistent (disk image copy)' : 'ephemeral (file by file)'}`, ms(median(t[0])), '']);
      if (persistent) {
        const m = (k) => ms(median(steps[k]));
        rows.push([`  its steps (medians): source frozen (FIFREEZE; meanwhile the copy's loop device and a first copy) ${m('freeze')}, changed pages copied again ${m('copy')}; ` +
          `mount ${m('mount')}, warm sandbox takes it ${m('start')}; server total ${m('server')}`, '', '']);
      }
      if (servers.length > 1)
        rows.push([`${what}, persistent, on --baseline-bin (interleaved with the row above)`, ms(median(t[1])), '']);
      for (let s = 0; s < servers.length; s++) await servers[s].callOk('close_sandbox', { sandbox_id: sources[s] });
    }
  } finally {
    if (base) await base.close?.();
  }
  const src = join(work, 'cp-src');
  sh('/bin/sh', ['-c', `mkdir -p ${src} && head -c ${opts.mib << 20} /dev/urandom > ${src}/data.bin && for i in $(seq 1 200); do echo $i > ${src}/f$i.txt; done && sync`]);
  const cp = [];
  for (let i = 0; i < opts.rounds; i++) {
    const dst = join(work, `cp-dst-${i}`);
    cp.push(await timed(async () => sh('cp', ['-a', src, dst])));
    rmSync(dst, { recursive: true, force: true });
  }
  rows.push([`cp -a of the same bytes on the state dir's disk (page cache warm)`, ms(median(cp)), '']);

  console.log(`${opts.rounds} rounds, medians; load average at the forks' start ${load0.toFixed(2)}, at the end ${loadavg()[0].toFixed(2)}`);
  console.log();
  console.log('| operation | p50 | p50 to the first result after it |');
  console.log('| --- | --- | --- |');
  for (const r of rows) console.log(`| ${r[0]} | ${r[1]} | ${r[2]} |`);
} finally {
  if (client) await client.close?.();
  rmSync(work, { recursive: true, force: true });
}
