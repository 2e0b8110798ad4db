// `sandcastle image build`: a Debian userland made by mmdebstrap from the
// Debian mirror (the one network use the tests allow), imported as an image
// whose language probe finds the packages asked for; then the server runs
// persistent python and node kernels in sandboxes rooted in it (Debian's
// own python3 and node, not the host's). Slow (about a minute or two,
// mostly downloads), so it runs in the e2e stage beside the others.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { spawn } from 'node:child_process';
import { BIN, E2E_DIR } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const run = promisify(execFile);
const state = mkdtempSync(join(tmpdir(), 'sc-image-build-'));
after(() => rmSync(state, { recursive: true, force: true }));

const hasMmdebstrap = existsSync('/usr/bin/mmdebstrap');

test('image build --packages python3,python3-pip,nodejs makes an image with python and node', { skip: !hasMmdebstrap && 'mmdebstrap missing', timeout: 15 * 60_000 }, async () => {
  const { stdout, stderr } = await run(
    BIN,
    ['--state-dir', state, 'image', 'build', 'debian-py', '--suite', 'bookworm', '--packages', 'python3,python3-pip,nodejs', '--json'],
    { maxBuffer: 64 << 20 },
  );
  assert.match(stderr, /sandcastle image build: mmdebstrap --variant=apt --format=tar .*--include=python3,python3-pip,nodejs bookworm /);
  const img = JSON.parse(stdout);
  assert.equal(img.name, 'debian-py');
  assert.equal(img.source, 'build:bookworm');
  assert.equal(img.layers.length, 1);
  assert.ok(img.languages.includes('python'), `languages: ${img.languages}`);
  assert.ok(img.languages.includes('bash') && img.languages.includes('sh'));
  assert.ok(img.languages.includes('javascript'), `languages: ${img.languages}`);
  assert.ok(!img.languages.includes('ruby'), 'ruby was not asked for');
  assert.ok(img.size_bytes > 50 << 20, `size ${img.size_bytes}`);
  // mmdebstrap's /dev nodes are not kept; the result says so.
  if (process.getuid() === 0) assert.ok(img.warnings.some((w) => /^skipped \d+ device nodes/.test(w)), img.warnings);

  const inspected = JSON.parse((await run(BIN, ['--state-dir', state, 'image', 'inspect', 'debian-py', '--json'])).stdout);
  assert.equal(inspected.id, img.id);
  assert.deepEqual(inspected.languages, img.languages);
  // Debian's python3 is a symlink inside the image (python3 -> python3.11).
  const layer = join(state, 'images', 'layers', 'sha256', img.layers[0].slice(7));
  assert.ok(lstatSync(join(layer, 'usr/bin/python3')).isSymbolicLink());
  assert.match(readlinkSync(join(layer, 'usr/bin/python3')), /^python3\.\d+$/);
});

test('python and node kernels run in a sandbox rooted in the built image', { skip: !hasMmdebstrap && 'mmdebstrap missing', timeout: 5 * 60_000 }, async () => {
  const sc = await connectSandcastle({ args: ['--state-dir', state], timeoutMs: 120000 });
  try {
    for (const [language, set, get, want] of [
      ['python', 'import sys; x = 41', 'print(x + 1, sys.version_info[:2])', '42 (3, 11)\n'],
      ['javascript', 'var x = 41', 'console.log(x + 1, process.versions.node.split(".")[0])', '42 18\n'],
    ]) {
      const sb = await sc.create({ image: 'debian-py', language });
      const first = await sc.ok('execute_code', { sandbox_id: sb.sandbox_id, code: set });
      assert.equal(first.mode, 'kernel', JSON.stringify(first));
      const second = await sc.ok('execute_code', { sandbox_id: sb.sandbox_id, code: get });
      assert.equal(second.stdout, want, `${language}: ${JSON.stringify(second)}`);
      const os = await sc.ok('execute_command', { sandbox_id: sb.sandbox_id, command: 'cat /etc/debian_version' });
      assert.match(os.stdout, /^12\./);
      await sc.ok('close_sandbox', { sandbox_id: sb.sandbox_id });
    }
  } finally {
    await sc.close();
  }
});

// seed b's save_container_state, done right: a package installed in an image
// sandbox (pip, from a local index through the egress proxy) is still there
// in a sandbox created from the saved image.
test('a package installed in an image sandbox survives save_sandbox', { skip: !hasMmdebstrap && 'mmdebstrap missing', timeout: 5 * 60_000 }, async () => {
  const index = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    index.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    index.once('error', reject);
  });
  const sc = await connectSandcastle({ args: ['--state-dir', state, '--pip-index-url', `http://127.0.0.1:${port}/simple/`], timeoutMs: 180000 });
  try {
    const sb = await sc.create({ image: 'debian-py', language: 'python' });
    const inst = await sc.ok('install_packages', { sandbox_id: sb.sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
    assert.equal(inst.status, 'success', JSON.stringify(inst));
    await sc.ok('write_file', { sandbox_id: sb.sandbox_id, path: 'notes.txt', content: 'kept\n' });
    const saved = await sc.ok('save_sandbox', { sandbox_id: sb.sandbox_id, name: 'debian-py-demo' });
    assert.equal(saved.image.name, 'debian-py-demo', JSON.stringify(saved));
    await sc.ok('close_sandbox', { sandbox_id: sb.sandbox_id });

    const again = await sc.create({ image: 'debian-py-demo', language: 'python' });
    const run = await sc.ok('execute_code', { sandbox_id: again.sandbox_id, code: 'import sandcastle_demo as d\nprint(d.VERSION, open("/workspace/notes.txt").read().strip())' });
    assert.equal(run.stdout, '1.2.3 kept\n', JSON.stringify(run));
    await sc.ok('close_sandbox', { sandbox_id: again.sandbox_id });
  } finally {
    await sc.close();
    index.kill();
  }
});
