// Images end to end, with the real store and the real binary: a root
// filesystem tar is imported with `sandcastle image import`, the server
// (same state dir) lists it, roots a sandbox in it, refuses a language the
// image lacks, and `image rm` is refused while that sandbox lives and
// succeeds once it is closed. CONTAINER_IMAGE naming the image starts the
// server with it as the default. Driven by the official SDK client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN } from './lib/harness.mjs';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

// A busybox userland: /bin/busybox and its applets, an os-release of its own.
function busyboxRootfs(dir) {
  const root = join(dir, 'rootfs');
  for (const d of ['bin', 'etc', 'tmp', 'workspace']) mkdirSync(join(root, d), { recursive: true });
  copyFileSync('/bin/busybox', join(root, 'bin/busybox'));
  for (const a of ['sh', 'ls', 'cat', 'echo', 'id', 'touch', 'rm']) symlinkSync('busybox', join(root, 'bin', a));
  writeFileSync(join(root, 'etc/os-release'), 'NAME="e2e busybox"\nID=e2e\n');
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  const tar = join(dir, 'rootfs.tar');
  execFileSync('tar', ['-C', root, '-cf', tar, '.']);
  return tar;
}

const cli = (state, ...args) => spawnSync(BIN, ['--state-dir', state, 'image', ...args], { encoding: 'utf8' });

describe('images with the real store', () => {
  let tmp, state, sc, imageId;
  before(async () => {
    tmp = tempDir('sandcastle-e2e-images-');
    state = join(tmp.dir, 'state');
    const imp = cli(state, 'import', busyboxRootfs(tmp.dir), '--name', 'e2e-busybox', '--json');
    assert.equal(imp.status, 0, imp.stderr);
    imageId = JSON.parse(imp.stdout).id;
    assert.match(imageId, /^sha256:[0-9a-f]{64}$/);
    sc = await connectSandcastle({ args: ['--state-dir', state], timeoutMs: 60000 });
  });
  after(async () => { await sc?.close(); tmp?.cleanup(); });

  test('list_images shows the imported image with its languages', async () => {
    const r = await sc.ok('list_images', {});
    const img = r.images.find((i) => i.name === 'e2e-busybox');
    assert.ok(img, JSON.stringify(r));
    assert.equal(img.id, imageId);
    assert.ok(img.languages.includes('sh'), JSON.stringify(img));
    assert.ok(!img.languages.includes('python'));
  });

  test('a sandbox rooted in the image sees its files; image rm waits for it', async () => {
    const sb = await sc.create({ image: 'e2e-busybox', language: 'sh' });
    const run = async (command) => (await sc.call('execute_command', { sandbox_id: sb.sandbox_id, command })).sc;
    const os = await run('cat /etc/os-release');
    assert.equal(os.exit_code, 0, os.stderr);
    assert.equal(os.stdout, 'NAME="e2e busybox"\nID=e2e\n');
    const w = await run('touch /etc/written-in-sandbox');
    assert.equal(w.exit_code, 0, w.stderr);
    const py = await sc.call('execute_code', { sandbox_id: sb.sandbox_id, code: 'print(1)', language: 'python' });
    assert.equal(py.isError, true);
    assert.match(py.text, /has no python3/);

    const refused = cli(state, 'rm', 'e2e-busybox');
    assert.notEqual(refused.status, 0, 'rm must be refused while a sandbox uses the image');
    assert.match(refused.stderr, /in use/i);
    await sc.ok('close_sandbox', { sandbox_id: sb.sandbox_id });
    // The layer is untouched by the sandbox's write, and rm now succeeds.
    const again = await sc.create({ image: 'e2e-busybox', language: 'sh' });
    const gone = (await sc.call('execute_command', { sandbox_id: again.sandbox_id, command: 'ls /etc/written-in-sandbox' })).sc;
    assert.notEqual(gone.exit_code, 0);
    await sc.ok('close_sandbox', { sandbox_id: again.sandbox_id });
    const rm = cli(state, 'rm', 'e2e-busybox');
    assert.equal(rm.status, 0, rm.stderr);
  });
});

describe('CONTAINER_IMAGE names a store image', () => {
  let tmp, state;
  before(() => {
    tmp = tempDir('sandcastle-e2e-images-ci-');
    state = join(tmp.dir, 'state');
    const imp = cli(state, 'import', busyboxRootfs(tmp.dir), '--name', 'e2e-default');
    assert.equal(imp.status, 0, imp.stderr);
  });
  after(() => tmp?.cleanup());

  test('the server starts with it as the default image', async () => {
    const sc = await connectSandcastle({ args: ['--state-dir', state], env: { CONTAINER_IMAGE: 'e2e-default', CONTAINER_LANGUAGE: 'sh' }, timeoutMs: 60000 });
    try {
      const sb = await sc.create({});
      assert.equal(sb.image, 'e2e-default');
      const r = (await sc.call('execute_command', { sandbox_id: sb.sandbox_id, command: 'cat /etc/os-release' })).sc;
      assert.equal(r.stdout, 'NAME="e2e busybox"\nID=e2e\n');
    } finally {
      await sc.close();
    }
  });
});
