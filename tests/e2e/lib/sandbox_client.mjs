// Helpers for the sandbox-tool suites (tools_*.test.mjs): start sandcastle
// with given flags and environment under the official SDK v1 client, and call
// its tools.
//
// `call` sends tools/call through client.request() with the plain
// CallToolResultSchema instead of client.callTool(): the v1 client checks
// structuredContent against the tool's outputSchema even on isError results
// and throws on a mismatch, which would hide the error text the tests check
// (see tools_errors.test.mjs, "SDK v1 callTool returns isError results").
// `sdkCall` is the real client.callTool for the tests that want it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { BIN } from './harness.mjs';
import { tap } from './tap.mjs';

export const SANDBOX_TOOLS = [
  'create_sandbox', 'list_sandboxes', 'get_sandbox_status', 'close_sandbox',
  'execute_code', 'execute_command',
  'list_files', 'read_file', 'write_file', 'upload_file', 'download_file',
];

// What an unknown-sandbox error must tell the model to do.
export const UNKNOWN_SANDBOX_HINT = /list_sandboxes|create_sandbox/;

function unpack(r) {
  const text = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { isError: r.isError === true, sc: r.structuredContent, text, raw: r };
}

function brief(r) {
  return JSON.stringify(r.raw ?? r).slice(0, 600);
}

// Starts sandcastle over stdio. `env` is added to the SDK's default
// environment (HOME, PATH, USER, ...); `args` are server flags.
export async function connectSandcastle({ args = [], env = {}, timeoutMs = 30000 } = {}) {
  const transport = new StdioClientTransport({ command: BIN, args, env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d) => { if (stderr.length < 65536) stderr += d; });
  const wire = tap(transport);
  const client = new Client({ name: 'sandcastle-e2e-tools', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  // Real clients list tools first; the v1 SDK caches output validators here.
  const { tools } = await client.listTools();

  const sc = {
    client, transport, wire, tools,
    stderr: () => stderr,
    tool: (name) => tools.find((t) => t.name === name),

    async call(name, args = {}, opts = {}) {
      const r = await client.request({ method: 'tools/call', params: { name, arguments: args } },
        CallToolResultSchema, { timeout: timeoutMs, ...opts });
      return unpack(r);
    },

    async sdkCall(name, args = {}, opts = {}) {
      return unpack(await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs, ...opts }));
    },

    // A successful call: returns structuredContent.
    async ok(name, args = {}, opts = {}) {
      const r = await sc.call(name, args, opts);
      assert.equal(r.isError, false, `${name} should succeed: ${brief(r)}`);
      assert.ok(r.sc && typeof r.sc === 'object', `${name} returns structuredContent: ${brief(r)}`);
      return r.sc;
    },

    // A failing call: returns the whole unpacked result ({text, sc, ...}).
    async err(name, args = {}, opts = {}) {
      const r = await sc.call(name, args, opts);
      assert.equal(r.isError, true, `${name} should be isError: ${brief(r)}`);
      assert.ok(r.text.length > 0, `${name} error says what went wrong`);
      return r;
    },

    async create(args = {}) {
      const s = await sc.ok('create_sandbox', args);
      assert.match(s.sandbox_id, /\S/);
      return s;
    },

    async close() {
      await client.close();
    },
  };
  return sc;
}

// A temporary host directory removed by the returned cleanup function.
export function tempDir(prefix = 'sandcastle-e2e-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
