// A minimal JSON-RPC client over a child's stdio, shared by the benchmarks
// that drive sandcastle directly (no SDK in the timed path).
//
// Lines are split as raw bytes, searching only each new chunk for the
// newline, so a response of hundreds of MiB (read_file of a large file) costs
// linear time; a round trip ends when the response's newline arrives, before
// the client parses it.
import { spawn } from 'node:child_process';

export class LineClient {
  constructor(command, args, env = {}) {
    this.proc = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    this.pending = new Map();
    this.nextId = 1;
    this.lastLineBytes = 0;  // size of the last response line
    this.stderr = '';
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (d) => { if (this.stderr.length < 20000) this.stderr += d; });
    this.exited = new Promise((res) => this.proc.on('exit', (code, signal) => res({ code, signal })));
    this.proc.on('exit', () => {
      for (const { reject } of this.pending.values()) reject(new Error(`server exited: ${this.stderr.slice(-500)}`));
      this.pending.clear();
    });
    let parts = [];  // chunks of the line being received
    this.proc.stdout.on('data', (chunk) => {
      let start = 0;
      let nl;
      while ((nl = chunk.indexOf(10, start)) >= 0) {
        const at = performance.now();
        parts.push(chunk.subarray(start, nl));
        const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts);
        parts = [];
        start = nl + 1;
        this.onLine(bytes, at);
      }
      if (start < chunk.length) parts.push(chunk.subarray(start));
    });
  }

  onLine(bytes, at) {
    const line = bytes.toString('utf8');
    if (!line.trim()) return;
    const msg = JSON.parse(line);
    if (msg.id !== undefined && 'method' in msg) {
      // A server-to-client request (e.g. roots/list): no such capability was declared.
      this.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'not supported by the bench client' } });
      return;
    }
    const p = msg.id !== undefined && this.pending.get(msg.id);
    if (p && ('result' in msg || 'error' in msg)) {
      this.pending.delete(msg.id);
      this.lastLineBytes = bytes.length;
      p.resolve({ msg, at, bytes: bytes.length });
    }
  }

  send(msg) { this.proc.stdin.write(`${JSON.stringify(msg)}\n`); }

  // Serialises a request now and returns a function that sends it and
  // resolves like request(): for messages of tens of MiB, so that the
  // client's own JSON encoding stays out of the timed round trip.
  prepare(method, params) {
    const id = this.nextId++;
    const line = Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    return () => {
      const done = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
      const t0 = performance.now();
      this.proc.stdin.write(line);
      return done.then(({ msg, at, bytes }) => ({ msg, t: at - t0, sent: line.length, bytes }));
    };
  }

  // Resolves with { msg, t } where t is the round trip in ms.
  request(method, params) {
    const id = this.nextId++;
    const t0 = performance.now();
    const done = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.send({ jsonrpc: '2.0', id, method, params });
    return done.then(({ msg, at, bytes }) => ({ msg, t: at - t0, bytes }));
  }

  // tools/call; a JSON-RPC error throws, an isError result is returned.
  async call(name, args) {
    const { msg, t } = await this.request('tools/call', { name, arguments: args });
    return this.result(name, msg, t);
  }

  result(name, msg, t) {
    if (msg.error) throw new Error(`${name}: JSON-RPC error ${JSON.stringify(msg.error)}`);
    return { r: msg.result, sc: msg.result.structuredContent, isError: msg.result.isError === true, t };
  }

  // tools/call that must succeed: an isError result throws too.
  async callOk(name, args) {
    const res = await this.call(name, args);
    if (res.isError) throw new Error(`${name}: ${res.r.content[0].text.slice(0, 300)}`);
    return res;
  }

  async initialize(clientName) {
    const { msg } = await this.request('initialize', {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: clientName, version: '1.0.0' },
    });
    if (!msg.result) throw new Error(`initialize failed: ${JSON.stringify(msg)}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  }

  async close() {
    this.proc.stdin.end();
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10000);
    await this.exited;
    clearTimeout(t);
  }
}
