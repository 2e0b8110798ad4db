// The kernel drivers (src/kernels/) on their own, outside any sandbox: each
// is started the way the server starts it and spoken to over the framed
// protocol (4-byte big-endian length, then a JSON object), so a fault in a
// driver shows up here in isolation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../../src/kernels/', import.meta.url));

// A listener on 127.0.0.1, the driver process, and the accepted connection.
async function startDriver(argv) {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const conn = new Promise((r) => server.once('connection', r));
  const proc = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, SANDCASTLE_KERNEL_PORT: String(server.address().port), SANDCASTLE_KERNEL_TOKEN: 'tok' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const sock = await conn;
  server.close();
  let buf = Buffer.alloc(0);
  const frames = [];
  let waiter = null;
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const n = buf.readUInt32BE(0);
      frames.push(JSON.parse(buf.subarray(4, 4 + n).toString('utf8')));
      buf = buf.subarray(4 + n);
    }
    if (waiter && frames.length) { const w = waiter; waiter = null; w(); }
  });
  const k = {
    proc,
    stderr: () => stderr,
    send(msg) {
      const body = Buffer.from(JSON.stringify(msg), 'utf8');
      const head = Buffer.alloc(4);
      head.writeUInt32BE(body.length);
      sock.write(Buffer.concat([head, body]));
    },
    // The next frame, or null after `ms`.
    async next(ms) {
      if (!frames.length) {
        const timer = new Promise((r) => setTimeout(r, ms, 'timeout'));
        const got = new Promise((r) => { waiter = r; });
        if (await Promise.race([got, timer]) === 'timeout') { waiter = null; return null; }
      }
      return frames.shift();
    },
    // Runs one cell: its stdout and the result frame.
    async run(id, code, ms = 5000) {
      k.send({ type: 'execute', id, code });
      let stdout = '';
      for (;;) {
        const f = await k.next(ms);
        if (!f) return { timedOut: true, stdout };
        if (f.id !== id) continue;
        if (f.type === 'stream' && f.name === 'stdout') stdout += f.text;
        if (f.type === 'result') return { result: f, stdout };
      }
    },
    close() { sock.destroy(); proc.kill('SIGKILL'); },
  };
  const hello = await k.next(10000);
  assert.equal(hello?.type, 'hello', `driver said hello: ${stderr}`);
  assert.equal(hello.token, 'tok');
  return k;
}

const DRIVERS = [
  { name: 'python', argv: ['python3', '-X', 'utf8', `${SRC}python_driver.py`],
    cell: (i) => `import time\nprint('a', ${i})\ntime.sleep(0.002)\nprint('b', ${i})\n${i}`,
    spin: 'while True:\n    pass', syncSpin: 'while True:\n    pass', value: (r) => r.value?.['text/plain'], interrupted: 'KeyboardInterrupt' },
  { name: 'javascript', argv: ['node', '--expose-internals', `${SRC}node_driver.js`],
    cell: (i) => `console.log('a', ${i});\nawait new Promise((r) => setTimeout(r, 2));\nconsole.log('b', ${i});\n${i}`,
    spin: 'await new Promise(() => {})', syncSpin: 'for (;;) {}', value: (r) => r.value?.['text/plain'], interrupted: 'Interrupted' },
];

for (const d of DRIVERS) {
  describe(`${d.name} driver`, () => {
    let k;
    before(async () => { k = await startDriver(d.argv); });
    after(() => k?.close());

    // Each execute follows the previous result at once, and each cell prints,
    // sleeps 2 ms and prints again. The Python driver's flush thread once
    // raced the main thread for the socket and could swallow the next
    // execute: within a hundred cells of this shape one hung for good.
    test('300 back-to-back cells all answer, each with its own output', async () => {
      for (let i = 0; i < 300; i++) {
        const r = await k.run(`c${i}`, d.cell(i));
        assert.ok(!r.timedOut, `cell ${i} got no result: ${k.stderr()}`);
        assert.equal(d.value(r.result), String(i), `cell ${i}`);
        assert.equal(r.stdout, `a ${i}\nb ${i}\n`, `cell ${i}`);
      }
    });

    test('an interrupt naming another cell is ignored; one naming the running cell stops it', async () => {
      k.send({ type: 'execute', id: 'spin', code: d.spin });
      await new Promise((r) => setTimeout(r, 100));
      k.send({ type: 'interrupt', id: 'some-earlier-cell' });
      assert.equal(await k.next(300), null, 'the running cell goes on');
      k.send({ type: 'interrupt', id: 'spin' });
      let f;
      do f = await k.next(3000); while (f && !(f.type === 'result' && f.id === 'spin'));
      assert.equal(f?.status, 'error', 'the interrupt ended the cell');
      assert.equal(f.error.name, d.interrupted);
      const again = await k.run('after', '40 + 2');
      assert.equal(d.value(again.result), '42');
      assert.equal(again.result.status, 'ok');
    });

    // What the sandbox sends when the in-band message goes unread.
    test('SIGINT stops a cell stuck in synchronous code; the kernel lives on', async () => {
      await k.run('set', d.name === 'python' ? 'kept = 7' : 'var kept = 7');
      k.send({ type: 'execute', id: 'sync', code: d.syncSpin });
      await new Promise((r) => setTimeout(r, 200));
      k.proc.kill('SIGINT');
      let f;
      do f = await k.next(3000); while (f && !(f.type === 'result' && f.id === 'sync'));
      assert.equal(f?.status, 'error', 'SIGINT ended the cell');
      assert.equal(f.error.name, d.interrupted);
      assert.equal(d.value((await k.run('kept', 'kept')).result), '7');
      // With no cell running, SIGINT is ignored.
      k.proc.kill('SIGINT');
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(d.value((await k.run('still', 'kept + 1')).result), '8');
    });
  });
}

describe('python driver: sources for tracebacks', () => {
  let k;
  before(async () => { k = await startDriver(DRIVERS[0].argv); });
  after(() => k?.close());

  // Only cells that define something keep their source (an idle kernel must
  // not grow with every `x += 1`); those are the ones a later traceback
  // points into.
  test('a function from an early cell still shows its line in a later traceback', async () => {
    await k.run('def', 'def f():\n    return 1 / 0');
    for (let i = 0; i < 50; i++) await k.run(`n${i}`, `y = ${i}`);
    const r = (await k.run('call', 'f()')).result;
    assert.equal(r.error.name, 'ZeroDivisionError');
    const tb = r.error.traceback.join('');
    assert.match(tb, /<cell-1>", line 2, in f\n\s+return 1 \/ 0/);
    assert.match(tb, /<cell-52>", line 1/);
  });
});

describe('javascript driver: declarations across cells', () => {
  let k;
  before(async () => { k = await startDriver(DRIVERS[1].argv); });
  after(() => k?.close());

  // As in a REPL: the same let/const/class may be declared again in a later
  // cell (the script scope would make that a SyntaxError).
  test('let, const and class can be declared again; values and positions are kept', async () => {
    const v = async (id, code) => {
      const r = (await k.run(id, code)).result;
      assert.equal(r.status, 'ok', JSON.stringify(r.error));
      return r.value?.['text/plain'];
    };
    await v('a', 'let x = 1;\nconst y = 2;\nclass P { get v() { return 3; } }');
    assert.equal(await v('b', 'let x = 10;\nconst y = 20;\nclass P { get v() { return 30; } }\nx + y + new P().v'), '60');
    assert.equal(await v('c', 'x'), '10');
    // Nested declarations are untouched, and a real syntax error still says where.
    assert.equal(await v('d', '{ let x = 5; x }'), '5');
    assert.equal(await v('e', 'x'), '10');
    const bad = (await k.run('f', 'let = ;')).result;
    assert.equal(bad.status, 'error');
    assert.equal(bad.error.name, 'SyntaxError');
  });
});
