// The run result as an MCP App (SEP-1865), with the official SDK client over
// Streamable HTTP: execute_code names ui://sandcastle/run-result in its
// _meta.ui.resourceUri, resources/list offers that resource with the MCP App
// profile, and resources/read returns exactly the view compiled into the
// binary (web/run_result.html). A client that knows nothing of MCP Apps still
// gets the same result content as before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { REPO_ROOT } from './lib/harness.mjs';
import { startHttp } from './lib/http.mjs';

const URI = 'ui://sandcastle/run-result';
let srv;
let client;

before(async () => {
  srv = await startHttp([]);
  client = new Client({ name: 'mcp-app-e2e', version: '1.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(srv.url)));
});
after(async () => {
  await client?.close().catch(() => {});
  await srv?.stop();
});

test('execute_code links its MCP App view; no other tool does', async () => {
  const { tools } = await client.listTools();
  const code = tools.find((t) => t.name === 'execute_code');
  assert.deepEqual(code._meta, { ui: { resourceUri: URI } });
  for (const t of tools.filter((t) => t.name !== 'execute_code')) assert.equal(t._meta, undefined, t.name);
});

test('resources/list offers the view with the MCP App profile', async () => {
  const { resources } = await client.listResources();
  const view = resources.filter((r) => r.uri === URI);
  assert.equal(view.length, 1);
  assert.equal(view[0].mimeType, 'text/html;profile=mcp-app');
});

test('resources/read returns the view compiled into the binary, byte for byte', async () => {
  const { contents } = await client.readResource({ uri: URI });
  assert.equal(contents.length, 1);
  assert.equal(contents[0].uri, URI);
  assert.equal(contents[0].mimeType, 'text/html;profile=mcp-app');
  assert.equal(contents[0].text, readFileSync(join(REPO_ROOT, 'web', 'run_result.html'), 'utf8'));
});

test('a run still answers as before for clients without MCP Apps', async () => {
  const r = await client.callTool({ name: 'execute_code', arguments: { code: 'print(6 * 7)', language: 'python' } });
  assert.equal(r.isError ?? false, false);
  assert.equal(r.structuredContent.stdout, '42\n');
  assert.equal(r.structuredContent.exit_code, 0);
});
