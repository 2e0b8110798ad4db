// A minimal JSON-RPC client over a child's stdio, shared by the benchmarks
// that drive sandcastle directly (no SDK in the timed path).
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
    let buf = '';
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const msg = JSON.parse(line);
        if (msg.id !== undefined && 'method' in msg) {
          // A server-to-client request (e.g. roots/list): no such capability was declared.
          this.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'not supported by the bench client' } });
          continue;
        }
        const p = msg.id !== undefined && this.pending.get(msg.id);
        if (p && ('result' in msg || 'error' in msg)) {
          this.pending.delete(msg.id);
          this.lastLineBytes = Buffer.byteLength(line);
          p.resolve({ msg, at: performance.now() });
        }
      }
    });
  }

  send(msg) { this.proc.stdin.write(`${JSON.stringify(msg)}\n`); }

  // Resolves with { msg, t } where t is the round trip in ms.
  request(method, params) {
    const id = this.nextId++;
    const t0 = performance.now();
    const done = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.send({ jsonrpc: '2.0', id, method, params });
    return done.then(({ msg, at }) => ({ msg, t: at - t0 }));
  }

  // tools/call; a JSON-RPC error throws, an isError result is returned.
  async call(name, args) {
    const { msg, t } = await this.request('tools/call', { name, arguments: args });
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
