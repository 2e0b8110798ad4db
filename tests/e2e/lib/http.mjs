// Starts sandcastle's HTTP transport on 127.0.0.1 with an ephemeral port
// (--port 0) and reads the bound URL from its "listening on" stderr line.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, binFor } from './harness.mjs';

export function tempStateDir() {
  return mkdtempSync(join(tmpdir(), 'sandcastle-http-state-'));
}

// Runs a `sandcastle keys ...` command; returns stdout.
export function keys(stateDir, ...args) {
  return execFileSync(BIN, ['--state-dir', stateDir, 'keys', ...args], { encoding: 'utf8' });
}

export async function startHttp(args = ['--test-fixtures'], { stateDir, env = {}, timeoutMs = 10000 } = {}) {
  const ownState = !stateDir;
  const dir = stateDir ?? tempStateDir();
  const proc = spawn(binFor(args), ['--transport', 'http', '--host', '127.0.0.1', '--port', '0', '--state-dir', dir,
    '--log-level', 'warn', ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening on" line within ${timeoutMs} ms:\n${stderr}`)), timeoutMs);
    proc.stderr.on('data', (c) => {
      stderr += c.toString('utf8');
      const m = stderr.match(/listening on (http:\/\/[^\s/]+)\/mcp/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`server exited ${code} before listening:\n${stderr}`)); });
  });
  return {
    base,
    url: `${base}/mcp`,
    sseUrl: `${base}/sse`,
    proc,
    stateDir: dir,
    exited,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const r = await exited;
      if (ownState) rmSync(dir, { recursive: true, force: true });
      return r;
    },
  };
}

export const JSON_AND_SSE = 'application/json, text/event-stream';

// POSTs one JSON-RPC body to /mcp; returns {status, headers, body (parsed JSON or SSE messages)}.
export async function post(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: JSON_AND_SSE, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  const ct = res.headers.get('content-type') ?? '';
  let parsed = text;
  if (ct.includes('application/json')) {
    try { parsed = JSON.parse(text); } catch { /* left as text */ }
  } else if (ct.includes('text/event-stream')) {
    parsed = parseSse(text);
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

// Splits an SSE body into events {id, event, data, retry}; data parsed as JSON when it is.
export function parseSse(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    if (!block.trim()) continue;
    const ev = { comment: [] };
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) { ev.comment.push(line.slice(1).trim()); continue; }
      const i = line.indexOf(':');
      const k = i < 0 ? line : line.slice(0, i);
      const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (k === 'data') data.push(v); else ev[k] = v;
    }
    if (data.length) {
      ev.data = data.join('\n');
      try { ev.json = JSON.parse(ev.data); } catch { /* not JSON */ }
    }
    events.push(ev);
  }
  return events;
}

export const INIT = (version = '2025-11-25', capabilities = {}) => ({
  jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: version, capabilities, clientInfo: { name: 'sandcastle-e2e-http', version: '1.0.0' } },
});

// Opens a legacy Streamable HTTP session by hand; returns {sid, headers}.
export async function openSession(url, { version = '2025-11-25', headers = {} } = {}) {
  const r = await post(url, INIT(version), headers);
  if (r.status !== 200) throw new Error(`initialize: HTTP ${r.status} ${r.text}`);
  const sid = r.headers.get('mcp-session-id');
  const h = { ...headers, 'mcp-session-id': sid, 'mcp-protocol-version': version };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return { sid, headers: h, init: r.body };
}

export function modernHeaders(method, name) {
  const h = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method };
  if (name !== undefined) h['mcp-name'] = name;
  return h;
}

// Reads SSE events from a fetch Response until `until(events)`, the end or
// the deadline (checked as data arrives: a stream with keep-alives ends on time).
// Each event: {event, data (parsed JSON), comment, t (arrival, ms)}.
export async function readSse(res, until = () => false, timeoutMs = 30000) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const events = [];
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = { event: 'message', data: '', comment: false, t: Date.now() };
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) ev.comment = true;
        else if (line.startsWith('event: ')) ev.event = line.slice(7);
        else if (line.startsWith('data: ')) ev.data += line.slice(6);
      }
      if (ev.data) ev.data = JSON.parse(ev.data);
      events.push(ev);
    }
    if (until(events)) break;
  }
  await reader.cancel().catch(() => {});
  return events;
}
