// Image import: `sandcastle image import` of a ~100 MiB `podman save`
// docker archive vs `podman load` of the same file, each into an empty store
// (a fresh state dir / a fresh podman --root), interleaved, medians and the
// ratio (issue 15's target: <= 0.5x). Needs root and podman; prints why not
// otherwise.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, copyFileSync, symlinkSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from './lib/args.mjs';

const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/image_bench.mjs',
  defaults: { sandcastle: 'build/sandcastle', rounds: 5, 'big-mib': 100 },
  types: { sandcastle: 'path', rounds: 'int', 'big-mib': 'int' },
});

const which = (t) => { try { execFileSync('which', [t], { stdio: 'ignore' }); return true; } catch { return false; } };
if (process.getuid() !== 0 || !which('podman')) {
  console.log('image_bench: skipped (needs root and podman)');
  process.exit(0);
}

const work = mkdtempSync('/tmp/scib-');  // podman wants a short runroot
const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
try {
  // A rootfs of busybox, 2,000 small files and random (incompressible) data up to the size asked for.
  const root = join(work, 'rootfs');
  mkdirSync(join(root, 'bin'), { recursive: true });
  copyFileSync('/bin/busybox', join(root, 'bin/busybox'));
  symlinkSync('busybox', join(root, 'bin/sh'));
  for (let d = 0; d < 20; d++) {
    mkdirSync(join(root, 'usr/share/small', String(d)), { recursive: true });
    for (let f = 0; f < 100; f++) writeFileSync(join(root, 'usr/share/small', String(d), `${f}.txt`), randomBytes(2048));
  }
  mkdirSync(join(root, 'usr/lib/big'), { recursive: true });
  const bigFiles = Math.max(1, Math.round((opts['big-mib'] - 6) / 4));
  for (let i = 0; i < bigFiles; i++) writeFileSync(join(root, 'usr/lib/big', `blob${i}.so`), randomBytes(4 << 20));
  const rootfsTar = join(work, 'rootfs.tar');
  sh('tar', ['-C', root, '--numeric-owner', '-cf', rootfsTar, '.']);
  const seedRoot = join(work, 'seed');
  const podman = (r) => ['--root', join(r, 'root'), '--runroot', join(r, 'run')];
  sh('podman', [...podman(seedRoot), 'import', rootfsTar, 'localhost/bench:latest']);
  const archive = join(work, 'bench-docker.tar');
  sh('podman', [...podman(seedRoot), 'save', '--format', 'docker-archive', '-o', archive, 'localhost/bench:latest']);
  sh('podman', [...podman(seedRoot), 'system', 'reset', '--force']);
  const mib = statSync(archive).size / (1 << 20);

  const time = (fn) => { const t0 = performance.now(); fn(); return performance.now() - t0; };
  const ours = [], theirs = [];
  // Each run starts after `sync`, so neither pays for the other's dirty
  // pages, and the order alternates (ABBA) against any drift.
  for (let i = 0; i < opts.rounds; i++) {
    const state = join(work, `state${i}`);
    const pr = join(work, `p${i}`);
    const a = () => { sh('sync', []); ours.push(time(() => sh(opts.sandcastle, ['--state-dir', state, 'image', 'import', archive]))); };
    const b = () => { sh('sync', []); theirs.push(time(() => sh('podman', [...podman(pr), 'load', '-i', archive]))); };
    if (i % 2 === 0) { a(); b(); } else { b(); a(); }
    sh('podman', [...podman(pr), 'system', 'reset', '--force']);
    rmSync(state, { recursive: true, force: true });
  }
  const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
  const ms = (v) => `${v.toFixed(0)} ms`;
  console.log(`archive: ${mib.toFixed(1)} MiB docker-archive (podman save), ${opts.rounds} rounds interleaved (ABBA, sync before each), ` +
    `load average at start ${loadavg()[0].toFixed(2)}`);
  console.log();
  console.log('| | median | all |');
  console.log('|---|---|---|');
  console.log(`| sandcastle image import | ${ms(median(ours))} | ${ours.map((v) => v.toFixed(0)).join(', ')} |`);
  console.log(`| podman load | ${ms(median(theirs))} | ${theirs.map((v) => v.toFixed(0)).join(', ')} |`);
  console.log(`| ratio (target <= 0.5) | ${(median(ours) / median(theirs)).toFixed(2)}x | |`);
} finally {
  try { execFileSync('podman', ['--root', join(work, 'seed', 'root'), '--runroot', join(work, 'seed', 'run'), 'system', 'reset', '--force'], { stdio: 'ignore' }); } catch {}
  rmSync(work, { recursive: true, force: true });
}
