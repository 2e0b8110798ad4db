// A Python one-shot runs in a Python started ahead in a pooled sandbox
// (service/ahead.h, src/kernels/python_ahead.py): the program must not be
// able to tell, but for the cost. What `python3 -u main.py` shows a program
// (argv, sys.path[0], __main__'s names, stdio, modules, the traceback and
// the exit status of each way to end) is compared with a plain python3 in a
// sandbox, and every call is a fresh process: its own hash seed and random
// state. Driven by the official SDK v1 client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle } from './lib/sandbox_client.mjs';

// What a program sees of how it was started, with its directory as <dir>.
const PROBE = String.raw`import json, os, sys
here = os.path.dirname(__file__)
facts = {
    "globals": sorted(globals()),
    "argv": [a.replace(here, "<dir>") for a in sys.argv],
    "orig_argv": [a.replace(here, "<dir>") for a in sys.orig_argv[1:]],
    "path0": sys.path[0].replace(here, "<dir>"),
    "main": [__name__, __spec__, __package__, type(__loader__).__name__, __cached__],
    "stdin": [sys.stdin.read(), sys.stdin.isatty(), sys.stdin.seekable()],
    "stdout": [sys.stdout.write_through, sys.stdout.line_buffering, sys.stdout.encoding],
    "fds": sorted(os.listdir("/proc/self/fd")),
    "modules": sorted(sys.modules),
    "flags": [sys.flags.hash_randomization, sys.flags.isolated, sys.flags.safe_path, sys.flags.inspect],
}
print(json.dumps(facts))
`;

const ENDINGS = {
  traceback: 'def inner():\n    raise ValueError("boom")\n\ndef outer():\n    inner()\n\nouter()\n',
  syntax: 'print("unclosed"\n',
  exit3: 'import sys\nprint("out")\nsys.exit(3)\n',
  exitmsg: 'raise SystemExit("a message")\n',
  interrupt: 'import atexit\natexit.register(lambda: print("atexit ran"))\nraise KeyboardInterrupt\n',
  chained: 'try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise RuntimeError("wrapped") from e\n',
};

describe('python one-shots started ahead', () => {
  let sc;
  let plain;
  before(async () => {
    // A pool larger than this suite's sandboxes before its last check, so
    // every one-shot takes a ready one (the refill never has to keep up).
    sc = await connectSandcastle({ args: ['--pool-size', '8'], timeoutMs: 60000 });
    plain = (await sc.create({ language: 'bash' })).sandbox_id;
  });
  after(async () => { await sc?.close(); });

  const oneShot = async (code, stdin) => (await sc.ok('execute_code', { language: 'python', code, ...(stdin ? { stdin } : {}) }));
  // The same program, as python3 runs it plainly: its file in a directory of
  // its own, its environment the one-shot's own (read from one).
  let runEnv;
  const plainRun = async (code, stdin) => {
    if (!runEnv) runEnv = (await oneShot('import os, json\nprint(json.dumps(dict(os.environ)))')).stdout;
    const n = Math.random().toString(36).slice(2);
    await sc.ok('write_file', { sandbox_id: plain, path: `/tmp/p-${n}/main.py`, content: code });
    await sc.ok('write_file', { sandbox_id: plain, path: `/tmp/p-${n}/env.json`, content: runEnv });
    const cmd = `cd /workspace && exec /usr/bin/python3 -c 'import json, os; e = json.load(open("/tmp/p-${n}/env.json")); os.execve("/usr/bin/python3", ["/usr/bin/python3", "-u", "/tmp/p-${n}/main.py"], e)'`;
    return sc.ok('execute_command', { sandbox_id: plain, command: cmd, ...(stdin ? { stdin } : {}) });
  };
  const dirless = (s) => s.replace(/\/tmp\/(\.sandcastle\/run-\d+|p-[a-z0-9]+)\/main\.py/g, '<main.py>');

  test('each call runs in a Python that was started ahead', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await oneShot('print(open("/proc/self/cmdline").read().split("\\0")[3][:60])');
      assert.match(r.stdout, /^# sandcastle's Python started ahead/, `call ${i}: ${r.stdout}`);
    }
  });

  test('what the program sees of its start is what python3 -u main.py shows', async () => {
    const ra = await oneShot(PROBE, "in\n");
    assert.equal(ra.exit_code, 0, ra.stderr);
    const a = JSON.parse(ra.stdout);
    const p = JSON.parse((await plainRun(PROBE, 'in\n')).stdout);
    assert.deepEqual(a, p);
    assert.deepEqual(a.argv, ['<dir>/main.py']);
    assert.deepEqual(a.stdin, ['in\n', false, false]);
  });

  for (const [name, code] of Object.entries(ENDINGS)) {
    test(`ending by ${name}: the same output and status`, async () => {
      const a = await oneShot(code);
      const p = await plainRun(code);
      assert.equal(dirless(a.stderr), dirless(p.stderr));
      assert.equal(a.stdout, p.stdout);
      assert.equal(a.exit_code, p.exit_code);
      assert.equal(a.signal ?? null, p.signal ?? null);
    });
  }

  test('every call draws its own hash seed and random state', async () => {
    const seen = new Set();
    for (let i = 0; i < 4; i++) {
      const r = await oneShot('import random\nprint(hash("same text"), random.random())');
      seen.add(r.stdout);
    }
    assert.equal(seen.size, 4, [...seen].join(''));
  });
});

describe('--start-ahead false', () => {
  let sc;
  before(async () => { sc = await connectSandcastle({ args: ['--start-ahead', 'false'], timeoutMs: 60000 }); });
  after(async () => { await sc?.close(); });

  test('one-shots start their own python3 as a plain command', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await sc.ok('execute_code', { language: 'python', code: 'print(open("/proc/self/cmdline").read().split("\\0")[1:])' });
      assert.match(r.stdout, /^\['-u', '\/tmp\/\.sandcastle\/run-\d+\/main\.py', ''\]\n$/);
    }
  });
});
