// The kernel drivers (src/kernels/) on their own, outside any sandbox: each
// is started the way the server starts it (its channel a unix socketpair at
// fd 3) and spoken to over the framed protocol (4-byte big-endian length,
// then a JSON object), so a fault in a driver shows up here in isolation.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../../src/kernels/', import.meta.url));
// The Python driver as the build embeds it (cmake/embed.cmake): the cell
// compiler, then the driver, in one file.
const PY_DRIVER = join(mkdtempSync(join(tmpdir(), 'sc-driver-')), 'python_driver.py');
writeFileSync(PY_DRIVER, ['python_cells.py', 'python_driver.py'].map((f) => readFileSync(SRC + f, 'utf8')).join(''));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The driver process, its channel at fd 3 ('pipe' there is a unix socketpair).
async function startDriver(argv, env = {}) {
  const proc = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const sock = proc.stdio[3];
  let buf = Buffer.alloc(0);
  const frames = [];
  let waiter = null;
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const n = buf.readUInt32BE(0);
      const f = JSON.parse(buf.subarray(4, 4 + n).toString('utf8'));
      Object.defineProperty(f, 'bytes', { value: n });  // the frame's size on the wire
      frames.push(f);
      buf = buf.subarray(4 + n);
    }
    if (waiter && frames.length) { const w = waiter; waiter = null; w(); }
  });
  sock.on('error', () => {});
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
      return k.collect(id, ms);
    },
    // The stdout and result of a cell already sent.
    async collect(id, ms = 5000) {
      let stdout = '';
      for (;;) {
        const f = await k.next(ms);
        if (!f) return { timedOut: true, stdout };
        if (f.id !== id) continue;
        if (f.type === 'stream' && f.name === 'stdout') stdout += f.text;
        if (f.type === 'result') return { result: f, stdout };
      }
    },
    // Threads: from /proc/<pid>/status.
    threads() {
      return Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))[1]);
    },
    close() { sock.destroy(); proc.kill('SIGKILL'); },
  };
  const hello = await k.next(10000);
  assert.equal(hello?.type, 'hello', `driver said hello: ${stderr}`);
  assert.equal(hello.pid, proc.pid);
  assert.equal(typeof hello.version, 'string');
  assert.equal('token' in hello, false);
  return k;
}

const DRIVERS = [
  { name: 'python', argv: ['python3', '-X', 'utf8', PY_DRIVER],
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

  // Short cells run again reuse their compiled code: each run must still
  // name its own cell, and a cell with functions is compiled afresh.
  test('a cell run again names its own cell in a traceback, at the right line', async () => {
    const cell = 'y = 1\nundefined_name + y';
    const tbs = [];
    for (const id of ['again1', 'again2', 'again3']) {
      const r = await k.run(id, cell);
      assert.equal(r.result.error.name, 'NameError');
      tbs.push(r.result.error.traceback.join(''));
    }
    const names = tbs.map((t) => /<cell-(\d+)>", line (\d+)/.exec(t));
    assert.ok(names.every(Boolean), tbs.join('\n'));
    assert.deepEqual(names.map((m) => m[2]), ['2', '2', '2']);
    assert.equal(new Set(names.map((m) => m[1])).size, 3, `each run its own cell: ${names.map((m) => m[0])}`);
    const f = 'def g():\n    return 1 / 0\ng()';
    const first = await k.run('fn1', f);
    const second = await k.run('fn2', f);
    const cellOf = (r) => /<cell-(\d+)>/.exec(r.result.error.traceback.join(''))[1];
    assert.notEqual(cellOf(first), cellOf(second));
    assert.equal((await k.run('sum', 'x = 0\nfor i in range(3):\n    x += i\nx')).result.value['text/plain'], '3');
    assert.equal((await k.run('sum2', 'x = 0\nfor i in range(3):\n    x += i\nx')).result.value['text/plain'], '3');
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

describe('python driver: the last expression is the result', () => {
  let k;
  before(async () => { k = await startDriver(DRIVERS[0].argv); });
  after(() => k?.close());
  let n = 0;
  const run = async (code) => {
    const r = await k.run(`e${n++}`, code);
    assert.ok(!r.timedOut, `no result: ${k.stderr()}`);
    return { ...r.result, stdout: r.stdout };
  };
  const value = async (code) => {
    const r = await run(code);
    assert.equal(r.status, 'ok', JSON.stringify(r.error));
    return r.value === undefined ? undefined : r.value['text/plain'];
  };

  test('a statement has no value, an expression has one', async () => {
    assert.equal(await value('x = 1'), undefined);
    assert.equal(await value('x'), '1');
    assert.equal(await value('x += 1'), undefined);
    assert.equal(await value('x'), '2');
  });

  test("the last of ';'-separated statements, like Jupyter", async () => {
    assert.equal(await value('a = 1; a'), '1');
    const r = await run('print(1); 2');
    assert.equal(r.value?.['text/plain'], '2');
    assert.equal(r.stdout, '1\n');
    assert.equal(await value('b = 5; b + 1;'), '6');
    assert.equal(await value("s = 'p;q'; s  # c; d"), "'p;q'");
    assert.equal(await value('c = 3  # ; c'), undefined);
    assert.equal(await value('if True: y = 4; y'), undefined);
  });

  test('statements spanning lines, with continuation lines at column 0', async () => {
    assert.equal(await value('def f(*a):\n    return sum(a)\nf(1,\n2,\n3)'), '6');
    assert.equal(await value('d = {\n"k": 1,\n"j": 2,\n}\nlen(d)'), '2');
    assert.equal(await value('[1,\n2]; 7'), '7');
    assert.equal(await value('{\n' + '"k": 1,\n'.repeat(120) + '}'), "{'k': 1}");
  });

  test('a value after a function definition; a definition last has none', async () => {
    assert.equal(await value('def g():\n    return 5\ng()'), '5');
    assert.equal(await value('def deco(f):\n    return f\n@deco\ndef h():\n    return 1'), undefined);
    assert.equal(await value('h()'), '1');
  });

  test('if/else at the end has no value', async () => {
    assert.equal(await value('if x:\n    z = 1\nelse:\n    z = 2'), undefined);
    assert.equal(await value('z'), '1');
  });

  test('a multi-line string whose inner lines start at column 0', async () => {
    assert.equal(await value('s = """\nx = 10\n(\n"""\ns'), "'\\nx = 10\\n(\\n'");
    assert.equal(await value('"""\nx = 10\n"""'), "'\\nx = 10\\n'");
    assert.equal(await value('x'), '2', 'the string did not run as code');
    assert.equal(await value('len("""\n' + 'a,b\n'.repeat(300) + '""")'), '1201');
  });

  test('comments at the end, and a cell of only comments', async () => {
    assert.equal(await value('x\n# a comment\n   # another'), '2');
    assert.equal(await value('# nothing\n# here'), undefined);
    assert.equal(await value(''), undefined);
  });

  test('await of a coroutine as the last line', async () => {
    assert.equal(await value('import asyncio\nasync def co(v):\n    await asyncio.sleep(0)\n    return v * 2\nawait co(21)'), '42');
    assert.equal(await value('r = await co(1)\nr'), '2');
  });

  test('a syntax error reports the line of the cell it is on', async () => {
    const r = await run('a = 1\nb = 2\nc = (3 +\nd = 4');
    assert.equal(r.status, 'error');
    assert.equal(r.error.name, 'SyntaxError');
    assert.match(r.error.value, /\(<cell-\d+>, line 3\)$/);
    assert.match(r.error.traceback.join(''), /File "<cell-\d+>", line 3\n/);
    const r2 = await run('x = 1\ny = 2\nz = = 3\nx');
    assert.equal(r2.error.name, 'SyntaxError');
    assert.match(r2.error.value, /, line 3\)$/);
  });

  test('an error in the final expression points at its line', async () => {
    const r = await run('a = 1\nb = 0\n\nprint(a) ;  a / b');
    assert.equal(r.status, 'error');
    assert.equal(r.error.name, 'ZeroDivisionError');
    const tb = r.error.traceback.join('');
    // The caret sits under the expression, past the ';'.
    assert.match(tb, /<cell-\d+>", line 4, in <module>\n {4}print\(a\) ;  a \/ b\n {16}~~\^~~\n/);
    assert.equal(r.stdout, '1\n');
    const r2 = await run('a = 1\nb = 0\n\n(a +\n a / b)');
    assert.match(r2.error.traceback.join(''), /<cell-\d+>", line 5, in <module>/);
  });
});

describe('python driver: compiling without compile()', () => {
  // Cells are compiled by exec/eval of their source, stopped by a trace
  // function before the first instruction (builtin compile() would build
  // every AST type): what else runs meanwhile must not let a cell run twice.
  let k;
  before(async () => { k = await startDriver(DRIVERS[0].argv); });
  after(() => k?.close());
  const run = async (id, code) => {
    const r = await k.run(id, code);
    assert.ok(!r.timedOut, `no result: ${k.stderr()}`);
    assert.equal(r.result.status, 'ok', JSON.stringify(r.result.error));
    return r.result.value?.['text/plain'];
  };

  test('ordinary cells load no AST, socket, json or threading module', async () => {
    const list = "[m for m in ('_ast', 'ast', '_socket', 'socket', 'json', 'threading') if m in sys.modules]";
    // What the interpreter loads by itself (a site hook may bring threading).
    const bare = execFileSync(DRIVERS[0].argv[0], ['-X', 'utf8', '-c', `import sys; print(${list})`]).toString().trim();
    await run('m0', 'x = 1');
    assert.equal(await run('m1', 'x'), '1');
    assert.equal(await run('m2', 'a = 1; a + x'), '2');
    assert.equal(await run('m3', `import sys\n${list}`), bare);
  });

  test('cells run once while the garbage collector runs Python code during compiles', async () => {
    await run('g0', 'import gc\nhits = []\ngc.callbacks.append(lambda phase, info: exec("t = (1, 2)", {}))\ngc.set_threshold(1)');
    for (let i = 1; i <= 40; i++) {
      assert.equal(await run(`g${i}`, `hits.append(${i}); t = (${i}, (1, 2), [3])\nlen(hits)`), String(i));
    }
    assert.equal(await run('gz', 'gc.callbacks.clear(); gc.set_threshold(700, 10, 10)\nhits == list(range(1, 41))'), 'True');
  });

  test("a compiler warning names the cell; a user's trace function is left alone", async () => {
    k.send({ type: 'execute', id: 'w', code: 'x = 1\ny = x is 1' });
    let err = '';
    for (;;) {
      const f = await k.next(5000);
      assert.ok(f, 'no result');
      if (f.type === 'stream' && f.name === 'stderr') err += f.text;
      if (f.type === 'result') break;
    }
    assert.match(err, /^<cell-\d+>:2: SyntaxWarning: "is" with a literal/);
    await run('t0', 'import sys\ncalls = []\ndef tracer(frame, event, arg):\n    calls.append(event)\nsys.settrace(tracer)');
    assert.equal(await run('t1', 'z = 5\nz'), '5');
    assert.equal(await run('t2', 'sys.gettrace() is tracer'), 'True');
    assert.equal(await run('t3', 'sys.settrace(None)\nlen(calls) > 0'), 'True');
  });
});

describe('python driver: the flusher thread comes and goes', () => {
  let k;
  before(async () => {
    k = await startDriver(DRIVERS[0].argv, { SANDCASTLE_KERNEL_READER_IDLE_MS: '50' });
  });
  after(() => k?.close());
  const waitThreads = async (n) => {
    for (let i = 0; i < 200 && k.threads() !== n; i++) await sleep(10);
    return k.threads();
  };

  test('an idle kernel has one thread, a busy one two', async () => {
    assert.equal(k.threads(), 1, 'a fresh kernel reads the channel on its main thread');
    k.send({ type: 'execute', id: 'busy', code: 'import time\ntime.sleep(0.4)' });
    await sleep(150);
    assert.equal(k.threads(), 2);
    assert.equal((await k.collect('busy')).result.status, 'ok');
    assert.equal(await waitThreads(1), 1, 'the reader left once idle');
    await sleep(200);
    assert.equal(k.threads(), 1, 'and none came back');
  });

  test('cells separated by idle periods keep working and keep state', async () => {
    await k.run('s0', 'total = 0');
    for (let i = 1; i <= 5; i++) {
      await sleep(120);
      assert.equal(k.threads(), 1);
      const r = await k.run(`s${i}`, `total += ${i}\ntotal`);
      assert.equal(r.result.value?.['text/plain'], String(i * (i + 1) / 2));
    }
  });

  // Pauses around the idle time: executes arrive while the reader runs, as
  // it leaves, and after it left.
  test('print/sleep/print cells across many idle transitions all answer', async () => {
    const cell = DRIVERS[0].cell;
    for (let i = 0; i < 90; i++) {
      await sleep(i % 3 === 0 ? 0 : 30 + (i * 7) % 60);
      const r = await k.run(`p${i}`, cell(i));
      assert.ok(!r.timedOut, `cell ${i} got no result: ${k.stderr()}`);
      assert.equal(r.result.value?.['text/plain'], String(i), `cell ${i}`);
      assert.equal(r.stdout, `a ${i}\nb ${i}\n`, `cell ${i}`);
    }
  });

  // Interrupts reach the main thread as SIGIO on the channel, not through a
  // second thread: they work where no thread can be started (a pids limit).
  test('an interrupt stops a cell when no helper thread can start', async () => {
    await k.run('nothreads', 'import _thread\n'
      + 'def _no_thread(*a, **kw):\n    raise RuntimeError("can\'t start new thread")\n'
      + '_real_start = _thread.start_new_thread\n_thread.start_new_thread = _no_thread');
    assert.equal(await waitThreads(1), 1);
    k.send({ type: 'execute', id: 'spin-nt', code: 'while True:\n    pass' });
    await sleep(100);
    assert.equal(k.threads(), 1, 'no flusher thread could start');
    k.send({ type: 'interrupt', id: 'spin-nt' });
    const r = await k.collect('spin-nt', 3000);
    assert.ok(!r.timedOut, 'the cell was not interrupted');
    assert.equal(r.result.error.name, 'KeyboardInterrupt');
    await k.run('threads-back', '_thread.start_new_thread = _real_start');
  });

  // The SIGIO that carries an interrupt often lands while the cell's output
  // is being written to the channel: the frame must still go out whole.
  test('an interrupt during a flood of output stops the cell and tears no frame', async () => {
    for (let i = 0; i < 5; i++) {
      k.send({ type: 'execute', id: `flood${i}`, code: 'while True:\n    print("y" * 3000)' });
      await sleep(60);
      k.send({ type: 'interrupt', id: `flood${i}` });
      const r = await k.collect(`flood${i}`, 5000);
      assert.ok(!r.timedOut, `flood ${i} was not interrupted`);
      assert.equal(r.result.error.name, 'KeyboardInterrupt');
      // (print's newline is a write of its own: the last line may lack it.)
      // (Checked line by line: a regex over megabytes overflows V8's stack.)
      const lines = r.stdout.split('\n');
      const last = lines.pop();
      assert.ok(lines.length > 0 && (last === '' || last === 'y'.repeat(3000)), `flood ${i}: ends with a whole line`);
      assert.ok(lines.every((l) => l === 'y'.repeat(3000)), `flood ${i}: whole lines`);
    }
    assert.equal((await k.run('after-flood', '6 * 7')).result.value?.['text/plain'], '42');
  });

  test('an interrupt for a cell started after an idle period stops it', async () => {
    for (const [i, wait] of [[0, 100], [1, 0], [2, 5]]) {
      await sleep(150);
      assert.equal(await waitThreads(1), 1);
      k.send({ type: 'execute', id: `spin${i}`, code: 'while True:\n    pass' });
      if (wait) await sleep(wait);
      k.send({ type: 'interrupt', id: `spin${i}` });
      const r = await k.collect(`spin${i}`, 3000);
      assert.ok(!r.timedOut, `spin ${i} was not interrupted`);
      assert.equal(r.result.status, 'error');
      assert.equal(r.result.error.name, 'KeyboardInterrupt');
    }
    // An interrupt naming no running cell, sent while idle, is dropped.
    await sleep(150);
    k.send({ type: 'interrupt', id: 'spin0' });
    assert.equal((await k.run('fine', '6 * 7')).result.value?.['text/plain'], '42');
  });
});

describe('the channel at fd 3', () => {
  // ls's own listing of /proc/self/fd takes the lowest free fd; fd 3 must
  // not be the kernel's socket. (Python's subprocess closes fds by default:
  // close_fds=False shows what the fd's own close-on-exec flag does.)
  const listFds = {
    python: "import subprocess\n" +
      "for cf in (True, False):\n" +
      "    print(subprocess.run(['ls', '-l', '/proc/self/fd'], capture_output=True, text=True, close_fds=cf).stdout)",
    javascript: "const cp = require('child_process');\n" +
      "const opts = { stdio: ['ignore', 'pipe', 'ignore'] };\n" +
      "console.log(String(cp.spawnSync('ls', ['-l', '/proc/self/fd'], opts).stdout));\n" +
      "console.log(String(cp.execSync('ls -l /proc/self/fd', opts)));",
  };
  for (const d of DRIVERS) {
    test(`${d.name}: processes a cell starts do not inherit it`, async () => {
      const k = await startDriver(d.argv);
      try {
        const r = await k.run('fd', listFds[d.name]);
        assert.equal(r.result.status, 'ok', JSON.stringify(r.result.error));
        const fds = [...r.stdout.matchAll(/ (\d+) -> (.*)$/gm)].map((m) => [Number(m[1]), m[2]]);
        assert.ok(fds.filter(([fd]) => fd === 3).length >= 2, r.stdout);
        for (const [fd, target] of fds) {
          if (fd >= 3) assert.ok(!target.startsWith('socket:'), `fd ${fd} -> ${target} in the child`);
        }
      } finally {
        k.close();
      }
    });
  }

  for (const d of DRIVERS) {
    test(`${d.name}: without a socket at fd 3 the driver says so and exits`, async () => {
      for (const stdio of [['ignore', 'pipe', 'pipe'], ['ignore', 'pipe', 'pipe', 'ignore']]) {
        const proc = spawn(d.argv[0], d.argv.slice(1), { stdio });
        let err = '';
        proc.stderr.on('data', (c) => { err += c; });
        const code = await new Promise((r) => proc.on('exit', r));
        assert.notEqual(code, 0);
        assert.match(err, /fd 3 is not the server's channel/);
      }
    });
  }
});

// The server ends a kernel whose frame breaks its limits (tools/kernel_frame.h);
// the drivers cut what a cell produces to fit the limits the execute message
// names, so ordinary code never meets them.
describe('frames fit the server\'s limits', () => {
  const LIMITS = { frame: 200000, display: 5000, text: 1000, depth: 128, values: 65536 };
  const cells = {
    python: {
      print: "import sys\nsys.stdout.write('y' * 200000 + '\\n')",
      value: "'z' * 300000",
      display: "display('d' * 10000)\ndisplay({'application/json': [[[[1]]]] , 'text/plain': 'nested'}, raw=True)",
      deep: "v = 1\nfor _ in range(200):\n    v = [v]\ndisplay({'application/json': v}, raw=True)",
      exits: ['raise SystemExit(2**40)', 'raise SystemExit(True)', 'raise SystemExit(-3)'],
      error: "raise ValueError('e' * 300000)",
    },
    javascript: {
      print: "process.stdout.write('y'.repeat(200000) + '\\n')",
      value: "({ 'text/plain': 'z'.repeat(300000) })",  // inspect() alone stops at 10000
      display: "display('d'.repeat(10000)); display({ 'application/json': [[[[1]]]], 'text/plain': 'nested' })",
      deep: "let v = 1; for (let i = 0; i < 200; i++) v = [v]; display({ 'application/json': v })",
      exits: ['process.exit(2 ** 40)', 'process.exit(1.5)', 'process.exit(-3)'],
      error: "throw new Error('e'.repeat(300000))",
    },
  };
  for (const d of DRIVERS) {
    test(`${d.name}: long output, a huge value or error, large or deep displays and odd exit codes all fit`, async () => {
      const k = await startDriver(d.argv);
      const c = cells[d.name];
      // Every frame of a cell, and its result.
      const all = async (id, code) => {
        k.send({ type: 'execute', id, code, limits: LIMITS });
        const got = [];
        for (;;) {
          const f = await k.next(10000);
          assert.ok(f, `cell ${id} answered: ${k.stderr()}`);
          assert.ok(f.bytes <= LIMITS.frame, `${f.type} frame of ${f.bytes} bytes`);
          if (f.id !== id) continue;
          got.push(f);
          if (f.type === 'result') return got;
        }
      };
      try {
        const printed = await all('print', c.print);
        const streams = printed.filter((f) => f.type === 'stream');
        assert.ok(streams.length >= 4, `${streams.length} stream frames`);
        for (const f of streams) assert.ok(f.text.length <= 65536);
        assert.equal(streams.map((f) => f.text).join(''), 'y'.repeat(200000) + '\n');

        const value = (await all('value', c.value)).at(-1);
        assert.match(value.value['text/plain'], /characters omitted/);
        assert.ok(value.value['text/plain'].length < 2 * LIMITS.text);

        const err = (await all('error', c.error)).at(-1);
        assert.equal(err.status, 'error');
        assert.ok(err.error.value.length < 2 * LIMITS.text);
        assert.ok(Array.isArray(err.error.traceback) && err.error.traceback.every((l) => typeof l === 'string'));

        const shown = (await all('display', c.display)).filter((f) => f.type === 'display');
        assert.equal(shown.length, 2);
        assert.match(shown[0].data['text/plain'], /display omitted: \d+ bytes, over the 5000-byte limit/);
        assert.deepEqual(shown[1].data['application/json'], [[[[1]]]]);

        const deep = (await all('deep', c.deep)).filter((f) => f.type === 'display');
        assert.match(JSON.stringify(deep[0].data), /omitted|nested deeper/);

        for (const [i, code] of c.exits.entries()) {
          const r = (await all(`exit${i}`, code)).at(-1);
          assert.ok(Number.isInteger(r.exit_code) && r.exit_code >= -(2 ** 31) && r.exit_code < 2 ** 31, `${code}: ${r.exit_code}`);
        }
      } finally {
        k.close();
      }
    });
  }

  test('javascript: lone surrogates reach the server as U+FFFD, never as invalid JSON text', async () => {
    const k = await startDriver(DRIVERS[1].argv);
    try {
      k.send({ type: 'execute', id: 'sur', code: "console.log('a\\ud800b\\udc00c😀'); display({ 'text/plain': 'x\\udfff' })" });
      const frames = [];
      for (let f = await k.next(5000); f && f.type !== 'result'; f = await k.next(5000)) frames.push(f);
      assert.equal(frames.filter((f) => f.type === 'stream').map((f) => f.text).join(''), 'a\ufffdb\ufffdc😀\n');
      assert.equal(frames.find((f) => f.type === 'display')?.data['text/plain'], 'x\ufffd');
    } finally {
      k.close();
    }
  });
});
