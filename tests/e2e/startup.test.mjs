// What a newcomer meets at start: the client configuration printed after the
// listening line (pasted as printed, it connects real clients), a busy port,
// GET /, settings of other servers that sandcastle cannot honour, --stdio,
// `make run`'s transport, --json on every listing, and the message for a
// sandbox that ended with its keyless HTTP session.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { BIN, E2E_DIR, REPO_ROOT, RawServer } from './lib/harness.mjs';
import { keys, startHttp, tempStateDir } from './lib/http.mjs';

const BIN_DIR = join(E2E_DIR, 'node_modules', '.bin');

// Resolves once the server's stderr holds `text` (the printed block ends
// with the browser line).
function stderrHas(srv, text, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (srv.stderr().includes(text)) {
        clearTimeout(timer);
        srv.proc.stderr.off('data', check);
        resolve(srv.stderr());
      }
    };
    const timer = setTimeout(() => reject(new Error(`no "${text}" on stderr:\n${srv.stderr()}`)), timeoutMs);
    srv.proc.stderr.on('data', check);
    check();
  });
}

// Every JSON document printed (one per line), by what it configures.
function printedConfigs(stderr) {
  const docs = stderr.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const entry = (d) => d.mcpServers.sandcastle;
  return {
    http: docs.map(entry).find((e) => e.type === 'http'),
    bridge: docs.map(entry).find((e) => e.command === 'npx'),
    stdio: docs.map(entry).find((e) => e.command && e.command !== 'npx'),
    count: docs.length,
  };
}

async function connect(transport) {
  const client = new Client({ name: 'sandcastle-e2e-startup', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function listsTools(transport) {
  const client = await connect(transport);
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'execute_code'), 'execute_code listed');
  } finally {
    await client.close();
  }
}

// A finished run of the binary: {code, stdout, stderr, ms}.
function run(args, { env = {}, input } = {}) {
  const t0 = performance.now();
  const r = spawnSync(BIN, args, { encoding: 'utf8', env: { ...process.env, ...env }, input, timeout: 20000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, ms: performance.now() - t0 };
}

describe('the client configuration printed at start', () => {
  let srv, state, key;
  before(async () => {
    state = tempStateDir();
    key = JSON.parse(keys(state, 'create', '--name', 'paste', '--json')).key;
    srv = await startHttp(['--auth'], { stateDir: state });
    await stderrHas(srv, 'In a browser:');
  });
  after(async () => {
    await srv?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('follows the listening line on stderr: HTTP, mcp-remote and stdio JSON, claude mcp add, the page', () => {
    const err = srv.stderr();
    const listening = err.indexOf('listening on');
    assert.ok(listening >= 0 && err.indexOf('Connect an MCP client') > listening, err);
    const c = printedConfigs(err);
    assert.equal(c.count, 3, err);
    assert.deepEqual(c.http, { type: 'http', url: srv.url, headers: { Authorization: 'Bearer <your key>' } });
    assert.deepEqual(c.bridge.args, ['-y', 'mcp-remote', srv.url, '--header', 'Authorization: Bearer <your key>']);
    assert.equal(c.stdio.command, BIN.startsWith('/') ? BIN : c.stdio.command);
    assert.ok(err.includes(`claude mcp add --transport http sandcastle ${srv.url} --header 'Authorization: Bearer <your key>'`), err);
    assert.ok(err.includes(`claude mcp add sandcastle -- ${c.stdio.command}`), err);
    assert.ok(err.includes(`In a browser: ${srv.base}/`), err);
    assert.ok(err.includes('sandcastle keys create'), 'says where a key comes from');
  });

  test('the HTTP entry, with the key in place of the placeholder, connects the SDK client', async () => {
    const { http } = printedConfigs(srv.stderr());
    const headers = { Authorization: http.headers.Authorization.replace('<your key>', key) };
    await listsTools(new StreamableHTTPClientTransport(new URL(http.url), { requestInit: { headers } }));
  });

  test('the mcp-remote entry, run as printed (npx resolves the installed bridge), connects', async () => {
    const { bridge } = printedConfigs(srv.stderr());
    const home = mkdtempSync(join(tmpdir(), 'sandcastle-paste-'));
    try {
      await listsTools(new StdioClientTransport({
        command: bridge.command,
        args: bridge.args.map((a) => a.replace('<your key>', key)),
        cwd: E2E_DIR,
        env: { ...process.env, HOME: home, MCP_REMOTE_CONFIG_DIR: home, npm_config_offline: 'true' },
        stderr: 'pipe',
      }));
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  test('the stdio entry starts a working server', async () => {
    const { stdio } = printedConfigs(srv.stderr());
    await listsTools(new StdioClientTransport({ command: stdio.command, args: stdio.args ?? [], stderr: 'pipe' }));
  });

  test('without keys the entries carry no header', async () => {
    const open = await startHttp([]);
    try {
      const c = printedConfigs(await stderrHas(open, 'In a browser:'));
      assert.deepEqual(c.http, { type: 'http', url: open.url });
      assert.deepEqual(c.bridge.args, ['-y', 'mcp-remote', open.url]);
      await listsTools(new StreamableHTTPClientTransport(new URL(c.http.url)));
    } finally {
      await open.stop();
    }
  });
});

describe('start-up errors and the transport flags', () => {
  test('a busy port: the error names the port and suggests --port, exit 2 at once', async () => {
    const first = await startHttp([]);
    try {
      const port = new URL(first.base).port;
      const r = run(['--transport', 'http', '--port', port, '--state-dir', first.stateDir]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`port ${port} is already in use`));
      assert.match(r.stderr, /--port <number>/);
      assert.ok(r.ms < 10000, `${r.ms} ms`);
      assert.equal(r.stdout, '');
    } finally {
      await first.stop();
    }
  });

  test('--stdio serves stdio; it cannot be combined with --transport', async () => {
    const s = new RawServer(['--stdio']);
    try {
      const init = await s.initialize();
      assert.equal(init.serverInfo.name, 'sandcastle');
    } finally {
      await s.close();
    }
    const both = run(['--stdio', '--transport', 'http']);
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /--stdio excludes --transport|--transport excludes --stdio/);
  });

  test('--help documents the transports, --stdio and make run', () => {
    const h = run(['--help']).stdout;
    assert.match(h, /--stdio/);
    assert.match(h, /make run ARGS="--port 9000"/);
    assert.match(h, /make run ARGS=--stdio/);
  });

  test('make run keeps HTTP unless ARGS picks a transport', () => {
    // MAKE=true: the recursive build step does nothing; -n prints the exec line.
    const line = (args) => execFileSync('make', ['-s', '-n', '-C', REPO_ROOT, 'run', 'MAKE=true', `ARGS=${args}`],
      { encoding: 'utf8' }).trim().split('\n').pop();
    assert.match(line(''), /sandcastle --transport http\s*$/, 'make run');
    assert.match(execFileSync('make', ['-s', '-n', '-C', REPO_ROOT, 'run', 'MAKE=true', 'ARGS=--port 9000'],
      { encoding: 'utf8' }), /sandcastle --transport http --port 9000/);
    for (const a of ['--stdio', '--transport stdio', '--transport=stdio'])
      assert.doesNotMatch(line(a), /--transport http/, a);
  });

  test('make run ARGS=--stdio writes nothing but MCP on stdout', () => {
    const build = relative(REPO_ROOT, dirname(BIN));
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'make', version: '1' } } };
    // From the source tree, as documented (make -C would add its own
    // "Entering directory" lines to stdout).
    const r = spawnSync('make', ['run', 'MAKE=true', `BUILD=${build}`, 'ARGS=--stdio'],
      { cwd: REPO_ROOT, encoding: 'utf8', input: `${JSON.stringify(init)}\n`, timeout: 20000 });
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, r.stdout);
    assert.equal(JSON.parse(lines[0]).result.serverInfo.name, 'sandcastle');
  });
});

describe('settings sandcastle cannot honour refuse the start', () => {
  const cases = [
    { what: 'INTERPRETER_TYPE=e2b', env: { INTERPRETER_TYPE: 'e2b', E2B_API_KEY: 'e2b_x' }, args: [],
      want: /^sandcastle: INTERPRETER_TYPE=e2b: .*no 'e2b' backend.*unset INTERPRETER_TYPE.*no E2B account or E2B_API_KEY is needed/m },
    { what: '--backend docker', env: {}, args: ['--backend', 'docker'], want: /^sandcastle: --backend docker: .*drop the flag/m },
    { what: 'CONTAINER_IMAGE', env: { CONTAINER_IMAGE: 'philschmi/code-sandbox-python:latest' }, args: [],
      // An image the store lacks (or no store at all): refused at start.
      want: /^sandcastle: CONTAINER_IMAGE=philschmi\/code-sandbox-python:latest: .*(no image store|not found|no image).*unset CONTAINER_IMAGE/m },
    { what: '--python-image', env: {}, args: ['--python-image', 'python:3.12'],
      want: /^sandcastle: --python-image python:3\.12: .*(no image store|not found|no image).*drop --python-image/m },
  ];
  for (const c of cases) {
    for (const transport of ['stdio', 'http']) {
      test(`${c.what} over ${transport}: exit 2 with the reason before serving anything`, () => {
        const state = tempStateDir();
        try {
          const r = run(['--transport', transport, '--port', '0', '--state-dir', state, ...c.args], {
            env: c.env,
            input: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }) + '\n',
          });
          assert.equal(r.code, 2, r.stderr);
          assert.match(r.stderr, c.want);
          assert.equal(r.stdout, '', 'nothing on the MCP channel');
          assert.doesNotMatch(r.stderr, /listening on/);
          assert.doesNotMatch(r.stderr, /e2b_x/, 'never echoes a key');
        } finally {
          rmSync(state, { recursive: true, force: true });
        }
      });
    }
  }

  test('E2B_API_KEY alone only warns; the server starts', async () => {
    const s = spawn(BIN, ['--log-level', 'warn'], { env: { ...process.env, E2B_API_KEY: 'e2b_secret' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    s.stderr.on('data', (c) => { err += c; });
    const exited = new Promise((r) => s.on('exit', (code) => r(code)));
    s.stdin.end();
    assert.equal(await exited, 0, err);
    assert.match(err, /warning: E2B_API_KEY is set, but sandcastle does not use E2B/);
    assert.doesNotMatch(err, /e2b_secret/);
  });
});

describe('every CLI listing takes --json', () => {
  let state;
  before(() => { state = tempStateDir(); });
  after(() => rmSync(state, { recursive: true, force: true }));
  const json = (...args) => {
    const r = run(['--state-dir', state, ...args]);
    assert.ok(r.code === 0 || (args[0] === 'doctor' && r.code === 1), `${args.join(' ')}: ${r.code} ${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  test('keys create/list/revoke, before or after the verb', () => {
    const k = json('keys', 'create', '--name', 'j1', '--json');
    assert.equal(k.name, 'j1');
    assert.match(k.key, /^sc_/);
    assert.equal(json('keys', '--json', 'create', '--name', 'j2').name, 'j2');
    const list = json('keys', 'list', '--json');
    assert.deepEqual(list.map((x) => x.name).sort(), ['j1', 'j2']);
    assert.deepEqual(json('keys', '--json', 'list'), list);
    assert.deepEqual(json('keys', 'revoke', 'j1', '--json'), { revoked: 'j1' });
    assert.ok(json('keys', 'list', '--json').find((x) => x.name === 'j1').revoked_at);
  });

  test('config show --json', () => {
    const c = json('config', 'show', '--json');
    assert.equal(c['server.port'].value, 8181);
    assert.equal(c['server.port'].source, 'default');
    assert.equal(c.state_dir.value, state);
  });

  test('doctor --json', () => {
    const d = json('doctor', '--json');
    assert.equal(typeof d.adequate, 'boolean');
    assert.ok(Array.isArray(d.problems));
    assert.ok(['v1', 'v2', 'none'].includes(d.cgroup_version), d.cgroup_version);
  });
});

describe('GET / and the ended-session message', () => {
  let srv;
  before(async () => { srv = await startHttp([]); });
  after(async () => { await srv?.stop(); });

  test('GET / answers JSON for programs and a page for browsers, with the security headers', async () => {
    const j = await fetch(`${srv.base}/`);
    assert.equal(j.status, 200);
    assert.equal(j.headers.get('content-type'), 'application/json');
    const body = await j.json();
    assert.equal(body.name, 'sandcastle');
    assert.match(body.version, /^\d+\.\d+\.\d+/);
    assert.equal(body.mcp.endpoint, '/mcp');
    assert.equal(body.mcp.url, srv.url);
    assert.equal(body.legacy_sse.endpoint, '/sse');
    assert.equal(body.health, '/healthz');
    assert.ok(body.docs);
    const h = await fetch(`${srv.base}/`, { headers: { accept: 'text/html' } });
    assert.equal(h.status, 200);
    assert.match(h.headers.get('content-type'), /^text\/html/);
    // A browser gets the web console (tests/e2e/console.test.mjs): its own
    // scripts only, revalidated on every load.
    assert.match(await h.text(), /<script type="module" src="\/assets\/[0-9a-f]{12}\/app\.js"><\/script>/);
    assert.match(h.headers.get('content-security-policy'), /default-src 'self'; script-src 'self';/);
    assert.equal(h.headers.get('cache-control'), 'no-cache');
    assert.match(j.headers.get('content-security-policy'), /default-src 'none'/);
    assert.equal(j.headers.get('cache-control'), 'no-store');
    for (const r of [j, h]) {
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(r.headers.get('x-frame-options'), 'DENY');
    }
    // DNS-rebinding protection still applies.
    const evil = spawnSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'Host: evil.example.com', `${srv.base}/`], { encoding: 'utf8' });
    assert.equal(evil.stdout, '403');
  });

  test('a sandbox of an ended keyless session: the error says so and how to keep sandboxes', async () => {
    const t1 = new StreamableHTTPClientTransport(new URL(srv.url));
    const c1 = await connect(t1);
    const created = await c1.callTool({ name: 'create_sandbox', arguments: {} });
    assert.ok(!created.isError, JSON.stringify(created.content));
    const id = (created.structuredContent ?? JSON.parse(created.content[0].text)).sandbox_id;
    await t1.terminateSession();
    await c1.close();
    const c2 = await connect(new StreamableHTTPClientTransport(new URL(srv.url)));
    try {
      // The session's sandboxes are destroyed off the request path: ask until
      // the answer changes from "in use by another owner" (plain not-found).
      let text = '';
      const deadline = performance.now() + 10000;
      while (performance.now() < deadline) {
        const r = await c2.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'print(1)' } });
        assert.ok(r.isError);
        text = r.content.map((b) => b.text).join('\n');
        if (/no longer exists/.test(text)) break;
        await new Promise((res) => setTimeout(res, 50));
      }
      assert.match(text, new RegExp(`sandbox '${id}' no longer exists: it ended when the HTTP session that created it ended`));
      assert.match(text, /API key/);
      assert.match(text, /create_sandbox/);
    } finally {
      await c2.close();
    }
  });
});
