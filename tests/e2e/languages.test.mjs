// Every language of execute_code (src/service/languages.cc), end to end through
// the official TypeScript SDK v1 client over stdio: a real program per check —
// hello world, a sum of standard input, a file that read_file then returns, a
// compile (or syntax) error, and a runtime error with its exit code. The
// languages run side by side; each one's checks in order.
//
// What ran is written to build/languages.json (LANGUAGES_JSON overrides), from
// which scripts/languages-table makes the README's table (`make languages-table`).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { BIN, REPO_ROOT } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const STDIN = '3\n4\n35\n';
const SUM = '42\n';

// Per language: programs for each check, how to ask the sandbox for its
// version, and what its runtime error must end with. `compiled` languages
// must report a bad program at stage "compile" (isError); interpreted ones
// report a syntax error from the run itself.
const LANGS = {
  python: {
    compiled: false,
    version: '/usr/bin/python3 --version',
    hello: 'print("hello, world")',
    stdin: 'import sys\nprint(sum(int(l) for l in sys.stdin))',
    file: 'open("/workspace/out.txt", "w").write("written by python\\n")',
    bad: 'print("unclosed',
    badText: /SyntaxError/,
    crashKind: 'raise',
    crash: 'raise ValueError("boom")',
    crashExit: 1,
    crashText: /ValueError: boom/,
  },
  javascript: {
    compiled: false,
    version: 'echo "node $(/usr/bin/node --version)"',
    hello: 'console.log("hello, world")',
    stdin: 'const s = require("fs").readFileSync(0, "utf8");\nconsole.log(s.split("\\n").filter(Boolean).map(Number).reduce((a, b) => a + b, 0));',
    file: 'require("fs").writeFileSync("/workspace/out.txt", "written by javascript\\n")',
    bad: 'console.log((',
    badText: /SyntaxError/,
    crashKind: 'throw',
    crash: 'throw new Error("boom")',
    crashExit: 1,
    crashText: /Error: boom/,
  },
  bash: {
    compiled: false,
    version: 'echo "bash ${BASH_VERSION%%(*}"',
    hello: 'echo "hello, world"',
    stdin: 's=0\nwhile read -r n; do s=$((s + n)); done\necho "$s"',
    file: 'echo "written by bash" > /workspace/out.txt',
    bad: 'if then fi',
    badText: /syntax error/,
    crashKind: 'unknown command',
    crash: 'no_such_command_sc',
    crashExit: 127,
    crashText: /not found/,
  },
  sh: {
    compiled: false,
    version: 'basename "$(readlink -f /bin/sh)"',
    hello: 'echo "hello, world"',
    stdin: 's=0\nwhile read -r n; do s=$((s + n)); done\necho "$s"',
    file: 'echo "written by sh" > /workspace/out.txt',
    bad: 'if then fi',
    badText: /Syntax error/i,
    crashKind: 'unknown command',
    crash: 'no_such_command_sc',
    crashExit: 127,
    crashText: /not found/,
  },
  c: {
    compiled: true,
    version: 'echo "gcc $(gcc -dumpfullversion)"',
    hello: '#include <stdio.h>\nint main(void) { puts("hello, world"); return 0; }',
    stdin: '#include <stdio.h>\nint main(void) { long s = 0, n; while (scanf("%ld", &n) == 1) s += n; printf("%ld\\n", s); return 0; }',
    file: '#include <stdio.h>\nint main(void) { FILE *f = fopen("/workspace/out.txt", "w"); if (!f) return 1; fputs("written by c\\n", f); return fclose(f) != 0; }',
    bad: 'int main(void) { return undeclared_variable; }',
    badText: /undeclared_variable/,
    crashKind: 'abort()',
    crash: '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { fputs("boom\\n", stderr); abort(); }',
    crashSignal: 6,
    crashText: /boom/,
  },
  cpp: {
    compiled: true,
    version: 'echo "g++ $(g++ -dumpfullversion)"',
    hello: '#include <iostream>\nint main() { std::cout << "hello, world\\n"; }',
    stdin: '#include <iostream>\nint main() { long s = 0, n; while (std::cin >> n) s += n; std::cout << s << "\\n"; }',
    file: '#include <fstream>\nint main() { std::ofstream("/workspace/out.txt") << "written by cpp\\n"; }',
    bad: 'int main() { std::string s = 1; }',
    badText: /error/,
    crashKind: 'uncaught throw',
    crash: '#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }',
    crashSignal: 6,
    crashText: /boom/,
  },
  go: {
    compiled: true,
    version: 'go version | cut -d" " -f3',
    hello: 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello, world") }',
    stdin: 'package main\n\nimport "fmt"\n\nfunc main() {\n\ts, n := 0, 0\n\tfor {\n\t\tif _, err := fmt.Scan(&n); err != nil {\n\t\t\tbreak\n\t\t}\n\t\ts += n\n\t}\n\tfmt.Println(s)\n}',
    file: 'package main\n\nimport "os"\n\nfunc main() {\n\tif err := os.WriteFile("/workspace/out.txt", []byte("written by go\\n"), 0o644); err != nil {\n\t\tpanic(err)\n\t}\n}',
    bad: 'package main\n\nfunc main() { x := 1 }',
    badText: /declared (and|but) not used/,
    crashKind: 'panic',
    crash: 'package main\n\nfunc main() { panic("boom") }',
    crashExit: 2,
    crashText: /panic: boom/,
  },
  rust: {
    compiled: true,
    version: 'rustc --version | cut -d" " -f1,2',
    hello: 'fn main() { println!("hello, world"); }',
    stdin: 'use std::io::Read;\nfn main() {\n    let mut s = String::new();\n    std::io::stdin().read_to_string(&mut s).unwrap();\n    let t: i64 = s.split_whitespace().map(|x| x.parse::<i64>().unwrap()).sum();\n    println!("{}", t);\n}',
    file: 'fn main() { std::fs::write("/workspace/out.txt", "written by rust\\n").unwrap(); }',
    bad: 'fn main() { let x: i32 = "str"; }',
    badText: /mismatched types/,
    crashKind: 'panic!',
    crash: 'fn main() { panic!("boom"); }',
    crashExit: 101,
    crashText: /boom/,
  },
  typescript: {
    compiled: true,
    version: 'echo "tsc $(tsc --version | cut -d" " -f2)"',
    hello: 'const msg: string = "hello, world";\nconsole.log(msg);',
    stdin: 'declare const require: any;\nconst s: string = require("fs").readFileSync(0, "utf8");\nconsole.log(s.split("\\n").filter(Boolean).map(Number).reduce((a: number, b: number) => a + b, 0));',
    file: 'declare const require: any;\nrequire("fs").writeFileSync("/workspace/out.txt", "written by typescript\\n");',
    bad: 'const n: number = "str";',
    badText: /TS2322/,
    crashKind: 'throw',
    crash: 'throw new Error("boom");',
    crashExit: 1,
    crashText: /Error: boom/,
  },
  java: {
    compiled: true,
    version: 'java -version 2>&1 | head -1 | sed "s/^openjdk version \\"\\([^\\"]*\\)\\".*/OpenJDK \\1/"',
    hello: 'public class Main {\n  public static void main(String[] args) {\n    System.out.println("hello, world");\n  }\n}',
    stdin: 'import java.util.Scanner;\n\npublic class Main {\n  public static void main(String[] args) {\n    Scanner in = new Scanner(System.in);\n    long s = 0;\n    while (in.hasNextLong()) s += in.nextLong();\n    System.out.println(s);\n  }\n}',
    file: 'import java.nio.file.*;\n\npublic class Main {\n  public static void main(String[] args) throws Exception {\n    Files.writeString(Path.of("/workspace/out.txt"), "written by java\\n");\n  }\n}',
    bad: 'public class Main {\n  public static void main(String[] args) {\n    int x = "str";\n  }\n}',
    badText: /incompatible types/,
    crashKind: 'uncaught exception',
    crash: 'public class Main {\n  public static void main(String[] args) {\n    throw new IllegalStateException("boom");\n  }\n}',
    crashExit: 1,
    crashText: /IllegalStateException: boom/,
  },
  perl: {
    compiled: false,
    version: 'perl -e \'print "perl $^V\\n"\'',
    hello: 'print "hello, world\\n";',
    stdin: 'my $s = 0;\n$s += $_ while <STDIN>;\nprint "$s\\n";',
    file: 'open(my $f, ">", "/workspace/out.txt") or die;\nprint $f "written by perl\\n";\nclose $f;',
    bad: 'print (;',
    badText: /syntax error/,
    crashKind: 'die',
    crash: 'die "boom\\n";',
    crashExit: 255,
    crashText: /boom/,
  },
  ruby: {
    compiled: false,
    version: 'ruby -e \'puts "ruby #{RUBY_VERSION}"\'',
    hello: 'puts "hello, world"',
    stdin: 'puts STDIN.read.split.map(&:to_i).sum',
    file: 'File.write("/workspace/out.txt", "written by ruby\\n")',
    bad: 'def (',
    badText: /syntax error/,
    crashKind: 'raise',
    crash: 'raise "boom"',
    crashExit: 1,
    crashText: /boom/,
  },
};

const CHECKS = ['hello', 'stdin', 'file', 'error', 'runtime_error'];

// The rows of the languages table, as the source has them.
function tableRows() {
  const src = readFileSync(join(REPO_ROOT, 'src/service/languages.cc'), 'utf8');
  return [...src.matchAll(/^ {6}\{"([a-z0-9+]+)",/gm)].map((m) => m[1]);
}

const results = {};
// Beside the binary when it is a build of this tree (build/, build-asan/, ...).
const OUT = process.env.LANGUAGES_JSON ??
  join(resolve(BIN).startsWith(`${REPO_ROOT}/`) ? dirname(resolve(BIN)) : join(REPO_ROOT, 'build'), 'languages.json');

describe('every language runs real programs over MCP (SDK v1)', () => {
  let sc;
  let available = [];
  before(async () => {
    sc = await connectSandcastle({ timeoutMs: 120000 });
    const desc = sc.tool('execute_code').description;
    const m = desc.match(/Languages: ([a-z0-9+, ]+)\./);
    assert.ok(m, `execute_code's description lists the languages: ${desc}`);
    available = m[1].split(', ');
  });
  after(async () => {
    await sc?.close();
    // A run of some tests only (--test-name-pattern, --test-only) is no table.
    if (process.execArgv.some((a) => a.startsWith('--test-name-pattern') || a === '--test-only')) return;
    const rows = tableRows().map((name) => results[name] ?? { language: name, available: available.includes(name), checks: {} });
    mkdirSync(dirname(OUT), { recursive: true });
    writeFileSync(OUT, `${JSON.stringify({ generated_at: new Date().toISOString(), languages: rows }, null, 2)}\n`);
  });

  test('every row of the languages table has programs here', () => {
    const rows = tableRows();
    assert.ok(rows.length >= 10, `parsed the table: ${rows}`);
    assert.deepEqual(rows.filter((r) => !LANGS[r]), []);
    for (const a of available) assert.ok(rows.includes(a), `${a} is a row`);
  });

  describe('languages', { concurrency: true }, () => {
    for (const [lang, p] of Object.entries(LANGS)) {
      describe(lang, { concurrency: 1 }, () => {
        const r = (results[lang] = { language: lang, available: false, compiled: p.compiled, version: null, checks: {} });
        let id;
        const skip = () => (available.includes(lang) ? false : `${lang} is not installed on this host`);
        // Records a check as passed only when its body finished.
        const check = (name, title, fn) =>
          test(title, async (t) => {
            if (skip()) return t.skip(skip());
            r.available = true;
            r.checks[name] = false;
            await fn();
            r.checks[name] = true;
          });
        const run = (code, extra = {}) => sc.call('execute_code', { language: lang, code, timeout_s: 90, ...extra });

        check('hello', 'hello world (one-shot)', async () => {
          const x = await run(p.hello);
          assert.equal(x.isError, false, x.text);
          assert.equal(x.sc.stdout, 'hello, world\n', x.text);
          assert.equal(x.sc.stderr, '', 'nothing on stderr');
          assert.equal(x.sc.exit_code, 0);
          assert.equal(x.sc.language, lang);
        });

        check('stdin', 'reads standard input', async () => {
          const x = await run(p.stdin, { stdin: STDIN });
          assert.equal(x.isError, false, x.text);
          assert.equal(x.sc.stdout, SUM, x.text);
          assert.equal(x.sc.exit_code, 0);
        });

        check('file', 'writes a file that read_file returns', async () => {
          id = (await sc.create({ language: lang, name: `lang-${lang}` })).sandbox_id;
          const x = await run(p.file, { sandbox_id: id });
          assert.equal(x.isError, false, x.text);
          assert.equal(x.sc.exit_code, 0, x.text);
          assert.ok(x.sc.files_created.some((f) => f.path === 'out.txt'), JSON.stringify(x.sc.files_created));
          const f = await sc.ok('read_file', { sandbox_id: id, path: 'out.txt' });
          assert.equal(f.content, `written by ${lang}\n`);
          const v = await sc.ok('execute_command', { sandbox_id: id, command: p.version });
          assert.equal(v.exit_code, 0, JSON.stringify(v));
          r.version = v.stdout.trim().split('\n')[0];
        });

        if (p.compiled) {
          check('error', 'a compile error is reported as one (stage "compile", nothing runs)', async () => {
            const x = await run(p.bad);
            assert.equal(x.isError, true, x.text);
            assert.equal(x.sc.stage, 'compile');
            assert.notEqual(x.sc.exit_code, 0);
            // tsc writes its diagnostics to stdout, the others to stderr.
            assert.match(x.sc.stderr + x.sc.stdout, p.badText);
          });
        } else {
          check('error', 'a syntax error fails the run with the interpreter\'s message', async () => {
            const x = await run(p.bad);
            assert.equal(x.sc.stage, 'run');
            assert.equal(x.sc.reason, 'exited');
            assert.notEqual(x.sc.exit_code, 0);
            assert.match(x.sc.stderr, p.badText);
          });
        }

        check('runtime_error', 'a runtime error comes back with its exit code and message', async () => {
          const x = await run(p.crash);
          assert.equal(x.isError, false, 'the program ran; its failure is its result');
          assert.equal(x.sc.stage, 'run');
          if (p.crashSignal) {
            assert.equal(x.sc.signal, p.crashSignal, x.text);
            assert.equal(x.sc.exit_code, 128 + p.crashSignal, x.text);
          } else {
            assert.equal(x.sc.reason, 'exited', x.text);
            assert.equal(x.sc.exit_code, p.crashExit, x.text);
          }
          assert.match(x.sc.stderr, p.crashText);
          r.runtime_exit = x.sc.exit_code;
          r.runtime_signal = x.sc.signal;
          r.runtime_error_kind = p.crashKind;
        });

        test('closes its sandbox', async (t) => {
          if (!id) return t.skip('no sandbox was made');
          await sc.ok('close_sandbox', { sandbox_id: id });
        });
      });
    }

    // As `java Main.java` takes it: the public class, else the first one, is
    // the program, whatever its name (javac alone wants Main in Main.java).
    test('java: a program whose class is not named Main compiles and runs', async (t) => {
      if (!available.includes('java')) return t.skip('no java');
      const progs = [
        ['public class Hello {\n  public static void main(String[] a) { System.out.println("hello"); }\n}', 'hello\n'],
        ['// class Foo, in a comment\nclass Solution {\n  public static void main(String[] a) { System.out.println("solution"); }\n}', 'solution\n'],
        ['import java.util.*;\n\nclass Helper { static int x = 7; }\n\npublic final class App {\n  public static void main(String[] a) { System.out.println(List.of(Helper.x)); }\n}', '[7]\n'],
      ];
      for (const [code, out] of progs) {
        const x = await sc.call('execute_code', { language: 'java', code, timeout_s: 90 });
        assert.equal(x.isError, false, x.text);
        assert.equal(x.sc.stdout, out, x.text);
        assert.equal(x.sc.stderr, '');
      }
    });

    // The JVM sees the host's RAM (a sandbox has no /sys); sized from it, its
    // heap would grow past the sandbox's limit before collecting.
    test('java: the heap follows the sandbox\'s memory limit, so garbage is collected, not OOM-killed', async (t) => {
      if (!available.includes('java')) return t.skip('no java');
      const id = (await sc.create({ language: 'java', limits: { memory_mb: 128 } })).sandbox_id;
      try {
        const x = await sc.call('execute_code', {
          sandbox_id: id,
          timeout_s: 90,
          code: 'public class Main {\n  static byte[] keep;\n  public static void main(String[] a) {\n' +
            '    for (int i = 0; i < 4000; i++) keep = new byte[1 << 20];\n' +
            '    System.out.println(Runtime.getRuntime().maxMemory() >> 20);\n  }\n}',
        });
        assert.equal(x.sc.reason, 'exited', x.text);
        assert.equal(x.sc.exit_code, 0, x.text);
        assert.ok(Number(x.sc.stdout) > 0 && Number(x.sc.stdout) <= 128, `max heap ${x.sc.stdout.trim()} MiB`);
      } finally {
        await sc.call('close_sandbox', { sandbox_id: id });
      }
    });

    // Each in a sandbox of its own: matplotlib runs fontconfig (fc-list) only
    // while it builds its font list, on the first plot in a sandbox.
    describe('python: matplotlib', () => {
      const mpl = (name, fn) =>
        test(name, async (t) => {
          if (!available.includes('python')) return t.skip('no python');
          const id = (await sc.create({ language: 'python' })).sandbox_id;
          try {
            await fn(id);
          } finally {
            await sc.call('close_sandbox', { sandbox_id: id });
          }
        });

      mpl('a plot in the kernel comes back as an image, with nothing on stderr', async (id) => {
        const x = await sc.call('execute_code', {
          sandbox_id: id,
          code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("fonts")\nplt.show()',
          timeout_s: 90,
        });
        assert.equal(x.isError, false, x.text);
        assert.equal(x.sc.stderr, '', 'no fontconfig or matplotlib warnings');
        const img = x.raw.content.find((c) => c.type === 'image');
        assert.ok(img, `image content: ${x.raw.content.map((c) => c.type)}`);
        assert.equal(img.mimeType, 'image/png');
        assert.equal(Buffer.from(img.data, 'base64').subarray(1, 4).toString(), 'PNG');
      });

      mpl('a plot saved by a separate process is a file, with nothing on stderr', async (id) => {
        const x = await sc.call('execute_code', {
          sandbox_id: id,
          fresh: true,
          code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title("fonts")\nplt.savefig("plot.png")',
          timeout_s: 90,
        });
        assert.equal(x.isError, false, x.text);
        assert.equal(x.sc.exit_code, 0, x.text);
        assert.equal(x.sc.stderr, '', 'no fontconfig or matplotlib warnings');
        assert.ok(x.sc.files_created.some((f) => f.path === 'plot.png'), JSON.stringify(x.sc.files_created));
        const f = await sc.ok('read_file', { sandbox_id: id, path: 'plot.png', encoding: 'base64' });
        assert.equal(Buffer.from(f.content, 'base64').subarray(1, 4).toString(), 'PNG');
      });
    });
  });
});
