// `sandcastle image build`: a Debian userland made by mmdebstrap from the
// Debian mirror (the one network use the tests allow), imported as an image
// whose language probe finds the packages asked for. Slow (about a minute,
// mostly downloads), so it runs in the e2e stage beside the others.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN } from './lib/harness.mjs';

const run = promisify(execFile);
const state = mkdtempSync(join(tmpdir(), 'sc-image-build-'));
after(() => rmSync(state, { recursive: true, force: true }));

const hasMmdebstrap = existsSync('/usr/bin/mmdebstrap');

test('image build --packages python3 makes an image with python', { skip: !hasMmdebstrap && 'mmdebstrap missing', timeout: 15 * 60_000 }, async () => {
  const { stdout, stderr } = await run(
    BIN,
    ['--state-dir', state, 'image', 'build', 'debian-py', '--suite', 'bookworm', '--packages', 'python3', '--json'],
    { maxBuffer: 64 << 20 },
  );
  assert.match(stderr, /sandcastle image build: mmdebstrap --variant=apt --format=tar .*--include=python3 bookworm /);
  const img = JSON.parse(stdout);
  assert.equal(img.name, 'debian-py');
  assert.equal(img.source, 'build:bookworm');
  assert.equal(img.layers.length, 1);
  assert.ok(img.languages.includes('python'), `languages: ${img.languages}`);
  assert.ok(img.languages.includes('bash') && img.languages.includes('sh'));
  assert.ok(!img.languages.includes('javascript'), 'node was not asked for');
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
