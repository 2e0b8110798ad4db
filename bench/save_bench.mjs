// save_sandbox with 50 MiB changed vs `podman commit` of a container with
// the same change, on the same busybox rootfs (imported into sandcastle's
// store and into a fresh podman --root), interleaved (ABBA), medians and
// the ratio (issue 15's target: <= 0.5x). The change: 25 MiB of random data
// written to / and 25 MiB to /workspace (podman: both under /). Each save
// is timed from the tools/call to its response; each commit as the podman
// command. Needs root and podman; prints why not otherwise.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/save_bench.mjs',
  defaults: { sandcastle: 'build/sandcastle', rounds: 6, mib: 50 },
  types: { sandcastle: 'path', rounds: 'int', mib: 'int' },
});

const which = (t) => { try { execFileSync('which', [t], { stdio: 'ignore' }); return true; } catch { return false; } };
if (process.getuid() !== 0 || !which('podman')) {
  console.log('save_bench: skipped (needs root and podman)');
  process.exit(0);
}

const work = mkdtempSync('/tmp/scsb-');  // podman wants a short runroot
const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
const podmanRoot = ['--root', join(work, 'proot'), '--runroot', join(work, 'prun')];
const podmanRun = ['--runtime', 'runc', '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768'];
const half = Math.max(1, Math.floor(opts.mib / 2));
const change = `dd if=/dev/urandom of=/data.bin bs=1M count=${half} 2>/dev/null && ` +
  `dd if=/dev/urandom of=/workspace/ws.bin bs=1M count=${half} 2>/dev/null && echo ok`;
let client;
try {
  const root = join(work, 'rootfs');
  for (const d of ['bin', 'etc', 'workspace']) mkdirSync(join(root, d), { recursive: true });
  copyFileSync('/bin/busybox', join(root, 'bin/busybox'));
  for (const a of ['sh', 'dd', 'sleep', 'echo', 'cat']) symlinkSync('busybox', join(root, 'bin', a));
  writeFileSync(join(root, 'etc/os-release'), 'ID=save-bench\n');
  const tar = join(work, 'rootfs.tar');
  sh('tar', ['-C', root, '--numeric-owner', '-cf', tar, '.']);
  const state = join(work, 'state');
  mkdirSync(state);
  sh(opts.sandcastle, ['--state-dir', state, 'image', 'import', tar, '--name', 'bench-bb']);
  sh('podman', [...podmanRoot, 'import', tar, 'localhost/bench-bb:latest']);

  client = new LineClient(opts.sandcastle, ['--state-dir', state]);
  await client.initialize('save-bench');

  const ours = [], theirs = [];
  const a = async (i) => {
    const { sc } = await client.callOk('create_sandbox', { image: 'bench-bb', language: 'sh' });
    const w = await client.callOk('execute_command', { sandbox_id: sc.sandbox_id, command: change });
    if (w.sc.stdout !== 'ok\n') throw new Error(`change failed: ${JSON.stringify(w.sc)}`);
    sh('sync', []);
    const t0 = performance.now();
    await client.callOk('save_sandbox', { sandbox_id: sc.sandbox_id, name: `saved-${i}` });
    ours.push(performance.now() - t0);
    await client.callOk('close_sandbox', { sandbox_id: sc.sandbox_id });
  };
  const b = (i) => {
    const name = `c${i}`;
    sh('podman', [...podmanRoot, 'run', ...podmanRun, '-d', '--name', name, 'localhost/bench-bb:latest', '/bin/sleep', '1000']);
    const out = sh('podman', [...podmanRoot, 'exec', name, '/bin/sh', '-c', `mkdir -p /workspace && ${change}`]).toString();
    if (out !== 'ok\n') throw new Error(`podman change failed: ${out}`);
    sh('sync', []);
    const t0 = performance.now();
    sh('podman', [...podmanRoot, 'commit', name, `localhost/committed-${i}:latest`]);
    theirs.push(performance.now() - t0);
    sh('podman', [...podmanRoot, 'rm', '-f', '-t', '0', name]);
  };
  for (let i = 0; i < opts.rounds; i++) {
    if (i % 2 === 0) { await a(i); b(i); } else { b(i); await a(i); }
  }
  const median = (v) => { const s = [...v].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
  const ms = (v) => `${v.toFixed(0)} ms`;
  console.log(`change: ${2 * half} MiB of random data (half in /, half in /workspace), ${opts.rounds} rounds ` +
    `interleaved (ABBA, sync before each), load average at start ${loadavg()[0].toFixed(2)}`);
  console.log();
  console.log('| | median | all |');
  console.log('|---|---|---|');
  console.log(`| sandcastle save_sandbox | ${ms(median(ours))} | ${ours.map((v) => v.toFixed(0)).join(', ')} |`);
  console.log(`| podman commit | ${ms(median(theirs))} | ${theirs.map((v) => v.toFixed(0)).join(', ')} |`);
  console.log(`| ratio (target <= 0.5) | ${(median(ours) / median(theirs)).toFixed(2)}x | |`);
} finally {
  if (client) await client.close().catch(() => {});
  try { execFileSync('podman', [...podmanRoot, 'rm', '-af', '-t', '0'], { stdio: 'ignore' }); } catch {}
  try { execFileSync('podman', [...podmanRoot, 'system', 'reset', '--force'], { stdio: 'ignore' }); } catch {}
  rmSync(work, { recursive: true, force: true });
}
