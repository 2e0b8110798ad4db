// sandcastle's JavaScript kernel driver. Runs inside a sandbox as a long-lived
// Node process; every cell runs in the same (main) context, so variables,
// functions and required modules persist, and top-level await works (the
// REPL's own rewrite, with declarations hoisted so they persist too).
//
// The server's channel is fd 3, one end of a connected unix socketpair that
// is open when the driver starts. Framing: 4-byte big-endian length, then one
// UTF-8 JSON object.
//   server -> driver: execute {id, code, stdin?, limits, list?}, interrupt {id},
//                     shutdown
//   driver -> server: hello {pid, version} (first), stream {id, name, text},
//                     display {id, data{mime: value}}, result {id, ...,
//                     listing?} (the workdir after the cell, when asked)
// Interrupts: a cell awaiting a promise is stopped by the in-band interrupt
// message; one stuck in synchronous code cannot read it and is stopped by
// SIGINT, which the sandbox sends a moment later (scripts run with
// breakOnSigint). Synchronous code after a cell's first await runs outside
// the script and is not stopped; the server kills the kernel after the grace.
'use strict';
const fs = require('fs');
const net = require('net');
const vm = require('vm');
const util = require('util');
const path = require('path');
const { createRequire } = require('module');
const { performance } = require('perf_hooks');

let processTopLevelAwait = null;
let acorn = null;
try {
  // Needs --expose-internals; without it, cells with top-level await are
  // wrapped in an async function whose declarations do not persist.
  ({ processTopLevelAwait } = require('internal/repl/await'));
  acorn = require('internal/deps/acorn/acorn/dist/acorn');
} catch (_) { /* fall back below */ }

// Like a REPL, a later cell may declare a name again: top-level `let` and
// `const` become `var`, and `class C {}` becomes `var C = class C {}`, so
// they live on the global object instead of the script scope, where a
// second declaration is a SyntaxError. (A const can then be reassigned.)
function redeclarable(code) {
  if (!acorn) return code;
  let ast;
  try {
    ast = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'script' });
  } catch (_) {
    return code;  // vm reports the syntax error, with its position
  }
  const edits = [];
  for (const node of ast.body) {
    if (node.type === 'VariableDeclaration' && (node.kind === 'let' || node.kind === 'const')) {
      edits.push([node.start, node.start + node.kind.length, 'var']);
    } else if (node.type === 'ClassDeclaration' && node.id) {
      edits.push([node.start, node.start, `var ${node.id.name} = `], [node.end, node.end, ';']);
    }
  }
  for (let i = edits.length - 1; i >= 0; i--) {
    const [from, to, text] = edits[i];
    code = code.slice(0, from) + text + code.slice(to);
  }
  return code;
}

const FLUSH_MS = 25;
const FLUSH_BYTES = 16 * 1024;
// The server checks every frame and ends the kernel on one it cannot take
// (too large, too deep, a field of the wrong type): output is cut to fit the
// limits the execute message names before it is sent.
const STREAM_CHUNK = 65536;  // UTF-16 units per stream frame
const limits = { frame: 12 << 20, display: 8 << 20, text: 1 << 20, depth: 128, values: 65536 };
const CHANNEL_FD = 3;

function openChannel() {
  let st;
  try {
    st = fs.fstatSync(CHANNEL_FD);
  } catch (e) {
    st = e;
  }
  if (!(st instanceof fs.Stats) || !st.isSocket()) {
    const why = st instanceof fs.Stats ? 'not a socket' : st.message;
    process.stderr.write(`sandcastle kernel: fd ${CHANNEL_FD} is not the server's channel (a connected unix socket): ${why}\n`);
    process.exit(2);
  }
  // Processes a cell starts do not inherit fd 3: node marks every fd it
  // inherited close-on-exec at startup (libuv's uv_disable_stdio_inheritance),
  // and child_process hands a child only the stdio it is given.
  return new net.Socket({ fd: CHANNEL_FD, readable: true, writable: true });
}
const sock = openChannel();

// JSON text whose lone surrogates (escaped by JSON.stringify as \udXXX) are
// U+FFFD: the server, like any strict parser, refuses them.
function encode(msg) {
  const text = JSON.stringify(msg).replace(/(\\+)u(d[89a-f][0-9a-f]{2})/g,
    (m, bs) => (bs.length % 2 ? bs.slice(1) + '\\ufffd' : m));
  return Buffer.from(text, 'utf8');
}

// False when v as JSON nests deeper than `depth` or holds more than `values`
// array elements and object members (the server's count).
function fits(v, depth, values) {
  const stack = [[v, 1]];
  let n = 0;
  while (stack.length) {
    const [o, d] = stack.pop();
    if (!o || typeof o !== 'object') continue;
    const items = Array.isArray(o) ? o : Object.values(o);
    n += Math.max(items.length, 1);
    if (d > depth || n > values) return false;
    for (const x of items) stack.push([x, d + 1]);
  }
  return true;
}

// The regular files below spec.dir as the file worker lists them (symlinks
// never followed: a subdirectory is read through the fd it was opened with
// O_NOFOLLOW; spec.skip left out at the top; at most spec.max entries of any
// type, then truncated): {files: [[path, size, mtime_sec, mtime_nsec]],
// truncated}. null when the server must list it itself: the directory
// cannot be read, a name is not UTF-8, or the listing is over spec.bytes.
const LIST_DEPTH = 64;  // the file worker's kMaxListDepth
const MAX_PATH = 4096;
function listWorkspace(spec) {
  const {dir: root, skip = '', max, bytes: budget} = spec;
  if (typeof root !== 'string' || !Number.isInteger(max) || !Number.isInteger(budget)) return null;
  const {O_RDONLY, O_DIRECTORY, O_NOFOLLOW} = fs.constants;
  const files = [];
  let n = 0, size = 0, truncated = false;
  const stack = [['', 0]];
  while (stack.length && !truncated) {
    const [rel, depth] = stack.pop();
    let fd;
    try {
      fd = fs.openSync(
          rel ? `${root}/${rel}` : root, O_RDONLY | O_DIRECTORY | (rel ? O_NOFOLLOW : 0));
    } catch (_) {
      if (!rel) return null;
      continue;  // gone or unreadable meanwhile: list what is there
    }
    const at = `/proc/self/fd/${fd}`;
    try {
      let names;
      try {
        names = fs.readdirSync(at, {encoding: 'buffer'});
      } catch (_) {
        if (!rel) return null;
        continue;
      }
      for (const raw of names) {
        const name = raw.toString('utf8');
        if (!Buffer.from(name, 'utf8').equals(raw)) return null;  // the file worker sends those
        if (!rel && name === skip) continue;
        let st;
        try {
          st = fs.lstatSync(`${at}/${name}`, {bigint: true});
        } catch (_) {
          continue;
        }
        if (n >= max) {
          truncated = true;
          break;
        }
        n += 1;
        const p = rel ? `${rel}/${name}` : name;
        if (st.isDirectory()) {
          if (depth + 1 < LIST_DEPTH && p.length < MAX_PATH - 256) stack.push([p, depth + 1]);
        } else if (st.isFile()) {
          size += Buffer.byteLength(p) + 48;
          if (size > budget) return null;
          const ns = st.mtimeNs;
          const sec = ns / 1000000000n - (ns % 1000000000n < 0n ? 1n : 0n);
          files.push([p, Number(st.size), Number(sec), Number(ns - sec * 1000000000n)]);
        }
      }
    } finally {
      fs.closeSync(fd);
    }
  }
  return {files, truncated};
}

function cut(s, n) {
  if (s.length <= n) return s;
  const half = Math.floor(n / 2);
  return `${s.slice(0, half)}\n... [${s.length - 2 * half} characters omitted] ...\n${s.slice(s.length - half)}`;
}

function send(msg) {
  sendData(encode(msg));
}

function sendData(body) {
  const head = Buffer.allocUnsafe(4);
  head.writeUInt32BE(body.length, 0);
  sock.write(Buffer.concat([head, body]));
}

let current = null;  // the running cell: {id, interrupt()}
let executionCount = 0;
const queue = [];

class CellStream {
  constructor(name) {
    this.name = name;
    this.parts = [];
    this.size = 0;
    this.last = performance.now();
    this.timer = null;
  }
  write(text) {
    if (!current || !text) return;
    this.parts.push(text);
    this.size += text.length;
    const now = performance.now();
    if (this.size >= FLUSH_BYTES || (now - this.last >= FLUSH_MS && text.endsWith('\n'))) {
      this.flush(now);
    } else if (!this.timer) {
      this.timer = setTimeout(() => { this.timer = null; this.flush(); }, FLUSH_MS);
    }
  }
  flush(now = performance.now()) {
    this.last = now;
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    if (!this.parts.length) return;
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (!current) return;
    for (let i = 0; i < text.length;) {
      let end = Math.min(i + STREAM_CHUNK, text.length);
      const last = text.charCodeAt(end - 1);
      if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;  // keep a pair whole
      send({ type: 'stream', id: current.id, name: this.name, text: text.slice(i, end) });
      i = end;
    }
  }
}
const streams = { stdout: new CellStream('stdout'), stderr: new CellStream('stderr') };

function capture(name) {
  return function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    streams[name].write(text);
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
}
process.stdout.write = capture('stdout');
process.stderr.write = capture('stderr');

function inspect(v) {
  return typeof v === 'string' ? util.inspect(v) : util.inspect(v, { depth: 4, colors: false });
}

function bundle(obj) {
  if (obj && typeof obj === 'object' && !Array.isArray(obj)) {
    const keys = Object.keys(obj);
    if (keys.length && keys.every((k) => k.includes('/'))) {
      const data = { ...obj };
      if (!data['text/plain']) data['text/plain'] = inspect(obj);
      return data;
    }
    const data = {};
    if (typeof obj.toHTML === 'function') { try { data['text/html'] = String(obj.toHTML()); } catch (_) { /* skip */ } }
    if (typeof obj.toMarkdown === 'function') { try { data['text/markdown'] = String(obj.toMarkdown()); } catch (_) { /* skip */ } }
    data['text/plain'] = inspect(obj);
    return data;
  }
  return { 'text/plain': inspect(obj) };
}

// display(obj): shows obj in the result. A plain object whose keys are MIME
// types ({'image/png': base64, 'text/html': '...'}) is sent as that bundle.
function display(...objs) {
  if (!current) return;
  for (const o of objs) {
    streams.stdout.flush();
    streams.stderr.flush();
    let data = bundle(o);
    if (!fits(data, limits.depth - 2, limits.values - 64)) {
      data = { 'text/plain': `<display omitted: nested deeper than ${limits.depth - 2} levels or more than ${limits.values - 64} values>` };
    }
    let body = encode({ type: 'display', id: current.id, data });
    if (body.length > limits.display) {
      body = encode({ type: 'display', id: current.id, data: { 'text/plain': `<display omitted: ${body.length} bytes, over the ${limits.display}-byte limit>` } });
    }
    sendData(body);
  }
}

class ExitRequest extends Error {
  constructor(code) { super('process.exit'); this.code = code; }
}

const workdir = process.cwd();
globalThis.require = createRequire(path.join(workdir, '[sandcastle]'));
globalThis.display = display;
globalThis.__dirname = workdir;
globalThis.__filename = path.join(workdir, '[sandcastle]');
const realExit = process.exit.bind(process);
process.exit = (code) => { throw new ExitRequest(code === undefined ? 0 : code); };

function errorInfo(e, filename) {
  if (!(e instanceof Error) && !(e && typeof e === 'object' && 'stack' in e)) {
    return { name: 'Uncaught', value: inspect(e), traceback: ['Uncaught ' + inspect(e) + '\n'] };
  }
  const stack = String(e.stack || `${e.name}: ${e.message}`).split('\n');
  // Only the user's frames: drop the driver's and Node's own.
  const kept = stack.filter((line, i) => i === 0 || !/^\s+at /.test(line) ||
    (!line.includes(__filename) && !/[( ]node:/.test(line)));
  void filename;
  return { name: String(e.name || 'Error'), value: String(e.message || e), traceback: kept.map((l) => l + '\n') };
}

process.on('uncaughtException', (e) => {
  if (current) streams.stderr.write('Uncaught ' + (e && e.stack ? e.stack : inspect(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  if (current) streams.stderr.write('Unhandled rejection: ' + (e && e.stack ? e.stack : inspect(e)) + '\n');
});
process.on('SIGINT', () => { if (current) current.interrupt(); });

async function runCell(msg) {
  executionCount += 1;
  const n = executionCount;
  const filename = `<cell-${n}>`;
  let interrupt;
  const interrupted = new Promise((_, reject) => {
    interrupt = () => {
      const e = new Error('Script execution interrupted.');
      e.name = 'Interrupted';
      reject(e);
    };
  });
  interrupted.catch(() => {});
  current = { id: msg.id, interrupt };
  const now = performance.now();
  streams.stdout.last = streams.stderr.last = now;
  const reply = { type: 'result', id: msg.id, execution_count: n, status: 'ok' };
  if (msg.limits && typeof msg.limits === 'object') {
    for (const k of Object.keys(limits)) if (Number.isInteger(msg.limits[k]) && msg.limits[k] > 0) limits[k] = msg.limits[k];
  }
  try {
    let code = String(msg.code || '');
    let wrapped = null;
    if (/\bawait\b/.test(code)) {
      if (processTopLevelAwait) {
        try { wrapped = processTopLevelAwait(code); } catch (_) { wrapped = null; }
      } else {
        wrapped = `(async () => { ${code}\n})()`;
      }
    }
    let value;
    if (wrapped) {
      const p = new vm.Script(wrapped, { filename }).runInThisContext({ breakOnSigint: true });
      const r = await Promise.race([p, interrupted]);
      value = r && typeof r === 'object' && 'value' in r && processTopLevelAwait ? r.value : undefined;
    } else {
      value = new vm.Script(redeclarable(code), { filename }).runInThisContext({ breakOnSigint: true });
    }
    if (value !== undefined) {
      globalThis._ = value;
      reply.value = bundle(value);
      if (!fits(reply.value, limits.depth - 2, limits.values - 64)) reply.value = { 'text/plain': inspect(value) };
    }
  } catch (e) {
    if (e instanceof ExitRequest) {
      const c = Number(e.code);  // the server takes a 32-bit integer
      reply.exit_code = Number.isInteger(c) && c >= -(2 ** 31) && c < 2 ** 31 ? c : (c ? 1 : 0);
    } else {
      // The in-band interrupt's error, or SIGINT's under breakOnSigint.
      if (e && (e.message === 'Script execution interrupted.' || e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')) {
        e.name = 'Interrupted';
      }
      reply.status = 'error';
      reply.error = errorInfo(e, filename);
      streams.stderr.write(reply.error.traceback.join(''));
    }
  } finally {
    streams.stdout.flush();
    streams.stderr.flush();
    current = null;
  }
  if (msg.list && typeof msg.list === 'object') {
    // The files the cell left, listed here after it: the server then needs
    // no second round trip to the file worker.
    try {
      reply.listing = listWorkspace(msg.list);
    } catch (_) {
      reply.listing = null;
    }
  }
  sendData(fitResult(reply));
}

// The result frame, cut down until it fits the server's frame limit.
function fitResult(reply) {
  let body = encode(reply);
  if (body.length <= limits.frame && fits(reply, limits.depth, limits.values)) return body;
  if (reply.listing) {  // the server lists the files itself
    reply.listing = null;
    body = encode(reply);
    if (body.length <= limits.frame && fits(reply, limits.depth, limits.values)) return body;
  }
  const { value, error } = reply;
  for (const keep of [limits.text, 1000]) {
    if (value !== undefined) reply.value = { 'text/plain': cut(String(value['text/plain'] ?? ''), keep) };
    if (error !== undefined) {
      error.value = cut(String(error.value ?? ''), keep);
      error.traceback = [cut((error.traceback || []).join(''), keep)];
    }
    body = encode(reply);
    if (body.length <= limits.frame) break;
  }
  return body;
}

let running = false;
async function pump() {
  if (running) return;
  running = true;
  while (queue.length) await runCell(queue.shift());
  running = false;
}

let inbuf = Buffer.alloc(0);
sock.on('data', (d) => {
  inbuf = inbuf.length ? Buffer.concat([inbuf, d]) : d;
  while (inbuf.length >= 4) {
    const n = inbuf.readUInt32BE(0);
    if (inbuf.length < 4 + n) break;
    const msg = JSON.parse(inbuf.subarray(4, 4 + n).toString('utf8'));
    inbuf = inbuf.subarray(4 + n);
    if (msg.type === 'execute') { queue.push(msg); pump(); }
    else if (msg.type === 'interrupt') { if (current && (msg.id === undefined || msg.id === current.id)) current.interrupt(); }
    else if (msg.type === 'shutdown') realExit(0);
  }
});
sock.on('close', () => realExit(0));
sock.on('error', () => realExit(0));
send({ type: 'hello', pid: process.pid, version: process.version });
