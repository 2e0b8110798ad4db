// Shared helpers for the e2e suites: where the server binary is, a raw
// line-based stdio driver (for what the SDKs hide), and the fixture tools'
// expected output.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const E2E_DIR = resolve(here, '..');
export const REPO_ROOT = resolve(E2E_DIR, '..', '..');

export const BIN = process.env.SANDCASTLE_BIN ?? resolve(REPO_ROOT, 'build', 'sandcastle');
if (!existsSync(BIN)) {
  throw new Error(`sandcastle binary not found at ${BIN}; build it or set SANDCASTLE_BIN`);
}
// The conformance fixtures are not in the product: a test-only server (the
// product's library plus tests/server/) offers them with --test-fixtures.
export const TEST_BIN = process.env.SANDCASTLE_TEST_BIN ?? resolve(dirname(BIN), 'sandcastle-test-server');
// The binary that serves `args`: the test server when they ask for fixtures.
export function binFor(args) {
  if (!args.includes('--test-fixtures')) return BIN;
  if (!existsSync(TEST_BIN)) {
    throw new Error(`test server not found at ${TEST_BIN}; build the sandcastle-test-server target or set SANDCASTLE_TEST_BIN`);
  }
  return TEST_BIN;
}

export const MODERN = '2026-07-28';
export const LEGACY_VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
export const CLIENT_INFO = { name: 'sandcastle-e2e', version: '1.0.0' };

// The _meta envelope every modern-era request carries.
export function modernMeta(extra = {}, capabilities = {}) {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
    ...extra,
  };
}

// A server process driven line by line. Every stdout line is kept raw and
// parsed; a line that is not JSON is recorded in `badLines` so tests can
// assert stdout never carries anything else.
export class RawServer {
  constructor(args = ['--test-fixtures'], { bin = binFor(args) } = {}) {
    this.proc = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.messages = [];
    this.rawLines = [];
    this.badLines = [];
    this.stderr = '';
    this.waiters = [];
    this.nextId = 1;
    this.exited = new Promise((res) => {
      this.proc.on('exit', (code, signal) => res({ code, signal, at: performance.now() }));
    });
    let buf = Buffer.alloc(0);
    this.proc.stdout.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      let nl;
      while ((nl = buf.indexOf(0x0a)) >= 0) {
        const line = buf.subarray(0, nl).toString('utf8');
        buf = buf.subarray(nl + 1);
        this.rawLines.push(line);
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          this.badLines.push(line);
          continue;
        }
        if (msg === null || typeof msg !== 'object') {
          this.badLines.push(line);
          continue;
        }
        this.messages.push(msg);
        this.waiters = this.waiters.filter((w) => !w.match(msg));
      }
    });
    this.proc.stdout.on('end', () => {
      if (buf.length) this.badLines.push(`(unterminated) ${buf.toString('utf8')}`);
    });
    this.proc.stderr.on('data', (c) => { this.stderr += c.toString('utf8'); });
    this.proc.stdin.on('error', () => {});
  }

  // Writes one line: an object is serialised, a string or Buffer is sent as is.
  write(msg, { newline = true } = {}) {
    const body = Buffer.isBuffer(msg) ? msg : Buffer.from(typeof msg === 'string' ? msg : JSON.stringify(msg));
    this.proc.stdin.write(newline ? Buffer.concat([body, Buffer.from('\n')]) : body);
  }

  // Resolves with the first message (already received or future) matching pred.
  waitFor(pred, timeoutMs = 5000, what = 'message') {
    const seen = this.messages.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((res, rej) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        rej(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; stdout so far:\n${this.rawLines.join('\n')}\nstderr:\n${this.stderr}`));
      }, timeoutMs);
      const waiter = {
        match: (m) => {
          if (!pred(m)) return false;
          clearTimeout(timer);
          res(m);
          return true;
        },
      };
      this.waiters.push(waiter);
    });
  }

  response(id, timeoutMs = 5000) {
    return this.waitFor((m) => 'id' in m && m.id === id && ('result' in m || 'error' in m), timeoutMs, `response to id ${JSON.stringify(id)}`);
  }

  // Sends a request with a fresh integer id (unless given) and awaits its response.
  async request(method, params, { id, timeoutMs } = {}) {
    const reqId = id ?? this.nextId++;
    const msg = { jsonrpc: '2.0', id: reqId, method };
    if (params !== undefined) msg.params = params;
    this.write(msg);
    return this.response(reqId, timeoutMs);
  }

  notify(method, params) {
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    this.write(msg);
  }

  async initialize(protocolVersion = '2025-06-18', capabilities = {}) {
    const r = await this.request('initialize', { protocolVersion, capabilities, clientInfo: CLIENT_INFO });
    if (r.error) throw new Error(`initialize failed: ${JSON.stringify(r.error)}`);
    this.notify('notifications/initialized');
    return r.result;
  }

  closeStdin() {
    this.proc.stdin.end();
  }

  // Ends stdin and waits for the exit; kills the process if it overstays.
  async close(timeoutMs = 3000) {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.exited;
    this.closeStdin();
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    const r = await this.exited;
    clearTimeout(timer);
    return r;
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Fixture tools registered by --test-fixtures, and what a call returns.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const WAV = 'UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA';

export const FIXTURE_TOOLS = [
  'test_simple_text', 'test_image_content', 'test_audio_content', 'test_embedded_resource',
  'test_multiple_content_types', 'test_tool_with_logging', 'test_tool_with_progress',
  'test_error_handling', 'json_schema_2020_12_tool', 'test_sleep', 'test_echo', 'test_needs_sampling',
];

// name → { args, content, isError?, structuredContent? }. Tools whose call
// needs special handling (test_needs_sampling in the modern era) are marked.
export const FIXTURE_CALLS = {
  test_simple_text: {
    args: {},
    content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
  },
  test_image_content: {
    args: {},
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  },
  test_audio_content: {
    args: {},
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  },
  test_embedded_resource: {
    args: {},
    content: [{
      type: 'resource',
      resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
    }],
  },
  test_multiple_content_types: {
    args: {},
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
    ],
  },
  test_tool_with_logging: {
    args: {},
    content: [{ type: 'text', text: 'Tool with logging executed successfully' }],
  },
  test_tool_with_progress: {
    args: {},
    content: [{ type: 'text', text: 'Tool with progress executed successfully' }],
  },
  test_error_handling: {
    args: {},
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
  },
  json_schema_2020_12_tool: {
    args: { name: 'Ada', address: { street: '1 Main St', city: 'London' } },
    content: [{ type: 'text', text: 'received: {"address":{"city":"London","street":"1 Main St"},"name":"Ada"}' }],
  },
  test_sleep: {
    args: { ms: 150 },
    check: (r, assert) => {
      assert.ok(r.structuredContent.slept_ms >= 140, `slept_ms ${r.structuredContent.slept_ms}`);
      assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
    },
  },
  test_echo: {
    args: { text: 'Hello', count: 3, mode: 'upper' },
    structuredContent: { text: 'HELLO', count: 3 },
    content: [{ type: 'text', text: '{"count":3,"text":"HELLO"}' }],
  },
  test_needs_sampling: {
    args: {},
    content: [{ type: 'text', text: 'client declared sampling' }],
  },
};

// Asserts a CallToolResult matches the fixture's expectation.
export function checkFixtureResult(assert, name, result) {
  const want = FIXTURE_CALLS[name];
  assert.equal(Boolean(result.isError), Boolean(want.isError), `${name}: isError`);
  if (want.content) assert.deepEqual(result.content, want.content, `${name}: content`);
  if (want.structuredContent) assert.deepEqual(result.structuredContent, want.structuredContent, `${name}: structuredContent`);
  if (want.check) want.check(result, assert);
}

// pid -> {ppid, start, state, comm} for every process, from /proc/<pid>/stat
// (a process that ends while the table is read is left out).
export function procTable() {
  const out = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try { stat = readFileSync(`/proc/${name}/stat`, 'utf8'); } catch { continue; }
    const close = stat.lastIndexOf(')');
    const f = stat.slice(close + 2).split(' ');
    out.set(Number(name), { ppid: Number(f[1]), start: f[19], state: f[0], comm: stat.slice(stat.indexOf('(') + 1, close) });
  }
  return out;
}
