// 200 sandboxes on one image cost the image's disk once (issue 15): an image
// of the host's python3 and its standard library (about 30-70 MiB) is
// imported, then --count sandboxes are created on it and each writes a file
// to / and to /workspace; `du` of the store (and of the server's runtime
// directory, where per-sandbox state would be) is taken before and with all
// of them live, beside the image's own size. The sandboxes' writes live in
// their own tmpfs (their disk limit), never in the store.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const opts = parseArgs(process.argv.slice(2), {
  script: 'bench/image_disk_bench.mjs',
  defaults: { sandcastle: 'build/sandcastle', count: 200 },
  types: { sandcastle: 'path', count: 'int' },
});

const sh = (cmd, args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }).toString();
const duKiB = (p) => Number(sh('du', ['-sk', '-x', p]).split('\t')[0]);
const work = mkdtempSync('/tmp/scdisk-');
let client;
try {
  // The rootfs: python3 with its libraries and stdlib, and busybox for a shell.
  const root = join(work, 'rootfs');
  mkdirSync(join(root, 'bin'), { recursive: true });
  mkdirSync(join(root, 'etc'), { recursive: true });
  const libs = sh('sh', ['-c', "ldd /usr/bin/python3.11 | awk '/=>/ {print $3} /ld-linux/ {print $1}'"]).split('\n').filter(Boolean);
  // tar keeps the paths as given (/lib64 is a symlink on the host).
  sh('sh', ['-c', 'tar -cf - "$@" 2>/dev/null | tar -C "$0" -xf -', root, '/usr/bin/python3.11', '/usr/lib/python3.11', ...libs]);
  sh('ln', ['-s', 'python3.11', join(root, 'usr/bin/python3')]);
  sh('cp', ['/bin/busybox', join(root, 'bin/busybox')]);
  for (const a of ['sh', 'echo', 'cat', 'dd']) sh('ln', ['-s', 'busybox', join(root, 'bin', a)]);
  writeFileSync(join(root, 'etc/os-release'), 'ID=disk-bench\n');
  const tar = join(work, 'rootfs.tar');
  sh('tar', ['-C', root, '--numeric-owner', '-cf', tar, '.']);
  const state = join(work, 'state');
  mkdirSync(state);
  sh(opts.sandcastle, ['--state-dir', state, 'image', 'import', tar, '--name', 'disk-bench']);
  const image = JSON.parse(sh(opts.sandcastle, ['--state-dir', state, 'image', 'inspect', 'disk-bench', '--json']));
  const store = join(state, 'images');
  const before = duKiB(store);

  client = new LineClient(opts.sandcastle, ['--state-dir', state, '--max-sandboxes', String(opts.count + 10), '--pool-size', '0']);
  await client.initialize('image-disk-bench');
  const ids = [];
  const t0 = performance.now();
  for (let i = 0; i < opts.count; i++) {
    const { sc } = await client.callOk('create_sandbox', { image: 'disk-bench', language: 'sh' });
    const w = await client.callOk('execute_command', { sandbox_id: sc.sandbox_id,
      command: 'dd if=/dev/zero of=/root-file bs=1024 count=256 2>/dev/null && dd if=/dev/zero of=/workspace/ws-file bs=1024 count=256 2>/dev/null && echo ok' });
    if (w.sc.stdout !== 'ok\n') throw new Error(`write failed: ${JSON.stringify(w.sc)}`);
    ids.push(sc.sandbox_id);
  }
  const createMs = performance.now() - t0;
  const during = duKiB(store);
  const mib = (k) => (k / 1024).toFixed(1);
  console.log(`${opts.count} sandboxes on one image, each with 512 KiB written (256 KiB to /, 256 KiB to /workspace); ` +
    `load average ${loadavg()[0].toFixed(2)}`);
  console.log();
  console.log('| measure | value |');
  console.log('|---|---|');
  console.log(`| the image (unpacked, as the store reports it) | ${mib(image.size_bytes / 1024)} MiB |`);
  console.log(`| \`du\` of the store before any sandbox | ${mib(before)} MiB |`);
  console.log(`| \`du\` of the store with ${opts.count} sandboxes live | ${mib(during)} MiB (${during >= before ? '+' : ''}${mib(during - before)} MiB) |`);
  console.log(`| what the sandboxes wrote (in their own tmpfs, on their disk limits) | ${mib(opts.count * 512)} MiB |`);
  console.log(`| ${opts.count} creates + writes, sequential | ${(createMs / 1000).toFixed(1)} s |`);
  for (const id of ids) await client.callOk('close_sandbox', { sandbox_id: id });
} finally {
  if (client) await client.close().catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
