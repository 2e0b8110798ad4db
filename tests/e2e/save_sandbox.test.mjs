// save_sandbox through the MCP tools with the real binary and image store:
// a busybox rootfs imported, a sandbox on it changed (/ and /workspace, a
// file of the image deleted, links to host secrets, a fifo), saved, and a
// new sandbox created from the saved image sees the same files. A save that
// fails (past --max-image-bytes) leaves the store unchanged.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN } from './lib/harness.mjs';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

const tmp = tempDir('sc-save-e2e-');
after(() => tmp.cleanup());
const state = join(tmp.dir, 'state');

function makeRootfs() {
  const root = join(tmp.dir, 'rootfs');
  for (const d of ['bin', 'etc', 'srv', 'workspace']) mkdirSync(join(root, d), { recursive: true });
  copyFileSync('/bin/busybox', join(root, 'bin/busybox'));
  chmodSync(join(root, 'bin/busybox'), 0o755);
  for (const a of ['sh', 'ls', 'cat', 'echo', 'rm', 'mkdir', 'ln', 'mkfifo', 'test', 'readlink', 'truncate', 'sleep', 'touch'])
    symlinkSync('busybox', join(root, 'bin', a));
  writeFileSync(join(root, 'etc/os-release'), 'ID=sandcastle-save-e2e\n');
  writeFileSync(join(root, 'srv/data'), 'base data\n');
  const tar = join(tmp.dir, 'rootfs.tar');
  execFileSync('tar', ['-C', root, '-cf', tar, '.']);
  return tar;
}

test('save_sandbox: changes saved as an image, a new sandbox continues from it', { timeout: 120_000 }, async () => {
  mkdirSync(state);
  execFileSync(BIN, ['--state-dir', state, 'image', 'import', makeRootfs(), '--name', 'bb-save']);
  const sc = await connectSandcastle({ args: ['--state-dir', state, '--max-image-bytes', String(128 << 20)], timeoutMs: 60_000 });
  try {
    assert.ok(sc.tool('save_sandbox'), 'save_sandbox is listed');
    const { sandbox_id: id } = await sc.create({ image: 'bb-save', language: 'sh' });
    const w = await sc.ok('execute_command', {
      sandbox_id: id,
      command: 'echo root-write > /etc/added && echo ws > /workspace/w.txt && rm /srv/data && ' +
        'ln -s /etc/shadow /workspace/shadow && ln -s /proc/1/root /workspace/procroot && mkfifo /workspace/fifo && echo ok',
    });
    assert.equal(w.stdout, 'ok\n', JSON.stringify(w));
    const before = (await sc.ok('list_images')).images.map((i) => i.name);

    const saved = await sc.ok('save_sandbox', { sandbox_id: id, name: 'bb-saved' });
    assert.equal(saved.image.name, 'bb-saved');
    assert.equal(saved.image.base, 'bb-save');
    assert.equal(saved.image.layers, 2);
    assert.equal(saved.saved, 'root');
    assert.equal(saved.skipped, 1);
    assert.deepEqual(saved.skipped_paths, ['/workspace/fifo']);
    // Root here has a writable freezer: the other processes stood still.
    if (process.getuid() === 0) assert.equal(saved.consistent, true, saved.consistency_note);
    else if (!saved.consistent) assert.match(saved.consistency_note, /taken while the sandbox's processes ran/);
    const names = (await sc.ok('list_images')).images.map((i) => i.name);
    assert.deepEqual(names.sort(), [...before, 'bb-saved'].sort());

    // The original sandbox still runs.
    assert.equal((await sc.ok('execute_command', { sandbox_id: id, command: 'cat /workspace/w.txt' })).stdout, 'ws\n');

    const { sandbox_id: id2 } = await sc.create({ image: 'bb-saved', language: 'sh' });
    const r = await sc.ok('execute_command', {
      sandbox_id: id2,
      command: 'cat /etc/added /workspace/w.txt /etc/os-release; test -e /srv/data || echo data-gone; ' +
        'readlink /workspace/shadow; readlink /workspace/procroot; test -e /workspace/fifo || echo no-fifo',
    });
    assert.equal(r.stdout, 'root-write\nws\nID=sandcastle-save-e2e\ndata-gone\n/etc/shadow\n/proc/1/root\nno-fifo\n', JSON.stringify(r));

    // Past --max-image-bytes: refused, the store unchanged.
    await sc.ok('execute_command', { sandbox_id: id2, command: 'truncate -s 200M /workspace/big' });
    const e = await sc.err('save_sandbox', { sandbox_id: id2, name: 'bb-too-big' });
    assert.match(e.text, /\/workspace\/big \(209715200 bytes\) would make the layer larger than the limit of 134217728 bytes \(--max-image-bytes\)/);
    const after2 = (await sc.ok('list_images')).images.map((i) => i.name);
    assert.deepEqual(after2.sort(), [...before, 'bb-saved'].sort());
    // A name the store refuses: the same.
    const bad = await sc.err('save_sandbox', { sandbox_id: id, name: 'Bad Name!' });
    assert.match(bad.text, /image name 'Bad Name!' is not valid/);
    assert.deepEqual((await sc.ok('list_images')).images.map((i) => i.name).sort(), [...before, 'bb-saved'].sort());
    // Nor is the layer's temporary file left behind.
    assert.deepEqual(readdirSync(state).filter((f) => f.startsWith('.save-')), []);

    // A sandbox on image "host" needs a base.
    const { sandbox_id: h } = await sc.create({ image: 'host', language: 'sh' });
    const he = await sc.err('save_sandbox', { sandbox_id: h, name: 'from-host' });
    assert.match(he.text, /image 'host'.*sandcastle image build.*sandcastle image import/s);
    await sc.ok('execute_command', { sandbox_id: h, command: 'echo host-ws > /workspace/h.txt' });
    const hs = await sc.ok('save_sandbox', { sandbox_id: h, name: 'from-host', base: 'bb-save' });
    assert.equal(hs.saved, 'workspace');
    const { sandbox_id: h2 } = await sc.create({ image: 'from-host', language: 'sh' });
    assert.equal((await sc.ok('execute_command', { sandbox_id: h2, command: 'cat /workspace/h.txt /etc/os-release' })).stdout,
      'host-ws\nID=sandcastle-save-e2e\n');
  } finally {
    await sc.close();
  }
});
