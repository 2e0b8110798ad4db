// A client without a key: a 401 that says what to do, and OAuth clients
// (mcp-remote, the SDK's auth flow) stopped at once with that message rather
// than left waiting for a browser sign-in that sandcastle does not offer.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { E2E_DIR } from './lib/harness.mjs';
import { INIT, keys, post, startHttp, tempStateDir } from './lib/http.mjs';

const MCP_REMOTE = join(E2E_DIR, 'node_modules', '.bin', 'mcp-remote');
// Well above the ~1 s mcp-remote needs to start, probe and give up here, and
// far below a sign-in wait (which never ends on its own).
const EXIT_BOUND_MS = 20000;

let srv, state, key;
before(async () => {
  state = tempStateDir();
  key = JSON.parse(keys(state, 'create', '--name', 'remote', '--json')).key;
  srv = await startHttp(['--auth'], { stateDir: state });
});
after(async () => {
  await srv?.stop();
  rmSync(state, { recursive: true, force: true });
});

// Runs mcp-remote against the server as Claude Desktop would (stdio), sends
// initialize, and waits for it to exit; kills it past the bound.
function runMcpRemote(args) {
  const home = mkdtempSync(join(tmpdir(), 'sandcastle-mcp-remote-'));
  const t0 = performance.now();
  const p = spawn(MCP_REMOTE, args, {
    env: { ...process.env, HOME: home, MCP_REMOTE_CONFIG_DIR: home, BROWSER: 'true' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  p.stderr.on('data', (c) => { stderr += c; });
  p.stdout.on('data', (c) => { stdout += c; });
  p.stdin.on('error', () => {});
  p.stdin.write(`${JSON.stringify(INIT('2025-06-18'))}\n`);
  const killer = setTimeout(() => p.kill('SIGKILL'), EXIT_BOUND_MS);
  return new Promise((resolve) => p.on('exit', (code, signal) => {
    clearTimeout(killer);
    rmSync(home, { recursive: true, force: true });
    resolve({ code, signal, stderr, stdout, ms: performance.now() - t0 });
  }));
}

describe('a client without a key', () => {
  test('POST /mcp: 401, WWW-Authenticate, and a body saying how to get and send a key', async () => {
    const r = await post(srv.url, INIT());
    assert.equal(r.status, 401);
    assert.match(r.headers.get('www-authenticate'), /^Bearer realm="sandcastle"/);
    assert.match(r.body.error, /requires an API key/);
    assert.match(r.body.error_description, /sandcastle keys create/);
    assert.match(r.body.error_description, /Authorization: Bearer <key>/);
  });

  test('the OAuth discovery documents: 404 with the hint, no key needed', async () => {
    for (const p of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const r = await fetch(`${srv.base}${p}`);
      assert.equal(r.status, 404, p);
      assert.match((await r.json()).error_description, /API key, not an OAuth sign-in/, p);
    }
    const reg = await fetch(`${srv.base}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(reg.status, 403);
    assert.equal((await reg.json()).error, 'access_denied');
  });

  test('mcp-remote with no header exits with the message within the bound, without waiting for a sign-in', async () => {
    const r = await runMcpRemote([srv.url]);
    assert.equal(r.signal, null, `killed after ${EXIT_BOUND_MS} ms (a hang); stderr:\n${r.stderr}`);
    assert.notEqual(r.code, 0);
    assert.ok(r.ms < EXIT_BOUND_MS, `${r.ms} ms`);
    assert.match(r.stderr, /sandcastle takes an API key, not an OAuth sign-in/);
    assert.match(r.stderr, /sandcastle keys create/);
    assert.doesNotMatch(r.stderr, /Waiting for authorization/);
    assert.equal(r.stdout, '', 'no MCP answer without a key');
  });

  test('mcp-remote with --header "Authorization: Bearer <key>" (the printed configuration) works', async () => {
    const home = mkdtempSync(join(tmpdir(), 'sandcastle-mcp-remote-'));
    const client = new Client({ name: 'sandcastle-e2e-remote', version: '1.0.0' });
    try {
      await client.connect(new StdioClientTransport({
        command: MCP_REMOTE,
        args: [srv.url, '--header', `Authorization: Bearer ${key}`],
        env: { ...process.env, HOME: home, MCP_REMOTE_CONFIG_DIR: home },
        stderr: 'pipe',
      }));
      assert.ok((await client.listTools()).tools.some((t) => t.name === 'execute_code'));
    } finally {
      await client.close();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
