// The four reference servers' workflows (../shared/seeds, notes in
// ../shared/notes/peers.md), end to end through the official TypeScript SDK
// v1 client over stdio: each seed must be fully replaceable by sandcastle.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SANDBOX_TOOLS, connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

const PASS_VALUE = 'pass-through-value-7f3a';
const HIDDEN_VALUE = 'hidden-host-value-91c2';

describe('sandbox tools: seed workflows (SDK v1)', () => {
  let sc;
  let host;
  before(async () => {
    host = tempDir('sandcastle-e2e-seeds-');
    sc = await connectSandcastle({
      args: ['--allow-host-path', host.dir, '--pass-through-env', 'SC_E2E_PASS'],
      env: { SC_E2E_PASS: PASS_VALUE, SC_E2E_HIDDEN: HIDDEN_VALUE },
    });
  });
  after(async () => {
    await sc?.close();
    host?.cleanup();
  });

  test('tools/list has every sandbox tool with input and output schemas', () => {
    const names = sc.tools.map((t) => t.name);
    for (const n of SANDBOX_TOOLS) assert.ok(names.includes(n), `${n} listed`);
    for (const n of SANDBOX_TOOLS) {
      const t = sc.tool(n);
      assert.equal(t.inputSchema.type, 'object', `${n} inputSchema`);
      assert.ok(t.outputSchema, `${n} has an outputSchema`);
      assert.ok(t.description.length > 40, `${n} has a real description`);
      assert.ok(t.annotations, `${n} has annotations`);
    }
    assert.equal(sc.tool('list_files').annotations.readOnlyHint, true);
    assert.equal(sc.tool('close_sandbox').annotations.destructiveHint, true);
  });

  // ---- seed a: mcp-code-sandbox (create, execute, files, upload, status, close, create_run_close)
  describe('seed a (mcp-code-sandbox)', () => {
    let id;

    test('create_sandbox returns id, name, language, image, limits, created_at', async () => {
      const s = await sc.create({ name: 'seed-a' });
      id = s.sandbox_id;
      assert.equal(s.name, 'seed-a');
      assert.equal(s.language, 'python');
      assert.equal(typeof s.image, 'string');
      for (const k of ['memory_mb', 'cpus', 'pids', 'disk_mb', 'timeout_s']) assert.equal(typeof s.limits[k], 'number', `limits.${k}`);
      assert.ok(!Number.isNaN(Date.parse(s.created_at)), `created_at is a date: ${s.created_at}`);
    });

    test('get_sandbox_status without an id summarises the active sandboxes', async () => {
      const s = await sc.ok('get_sandbox_status', {});
      assert.ok(s.active_sandboxes >= 1);
      assert.ok(s.sandbox_ids.includes(id));
    });

    test('execute_code keeps state between calls through files (by id and by name)', async () => {
      const w = await sc.ok('execute_code', { sandbox_id: id, code: "open('state.txt','w').write('42')" });
      assert.equal(w.exit_code, 0);
      assert.equal(w.reason, 'exited');
      assert.ok(w.files_created.some((f) => f.path === 'state.txt'), JSON.stringify(w.files_created));
      const r = await sc.ok('execute_code', { sandbox_id: 'seed-a', code: "print(int(open('state.txt').read()) + 1)" });
      assert.equal(r.stdout, '43\n');
      assert.equal(r.sandbox_id, id);
      assert.equal(typeof r.duration_ms, 'number');
      assert.equal(r.truncated, false);
    });

    test('write_file, list_files, read_file (text, parts, binary)', async () => {
      const wr = await sc.ok('write_file', { sandbox_id: id, path: 'data/input.txt', content: 'line one\nline two\n' });
      assert.equal(wr.size, 18);
      const ls = await sc.ok('list_files', { sandbox_id: id, path: 'data' });
      assert.deepEqual(ls.files.map((f) => f.name), ['input.txt']);
      assert.equal(ls.files[0].type, 'file');
      assert.equal(ls.files[0].size, 18);
      const all = await sc.ok('list_files', { sandbox_id: id, recursive: true });
      const paths = all.files.map((f) => f.path);
      assert.ok(paths.includes('/workspace/state.txt'), paths.join(' '));
      assert.ok(paths.includes('/workspace/data/input.txt'), paths.join(' '));
      const rd = await sc.ok('read_file', { sandbox_id: id, path: '/workspace/data/input.txt' });
      assert.equal(rd.content, 'line one\nline two\n');
      assert.equal(rd.size, 18);
      // Binary-safe both ways (seed a was text-only).
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      await sc.ok('write_file', { sandbox_id: id, path: 'bin/all.bytes', content: bytes.toString('base64'), encoding: 'base64' });
      const back = await sc.ok('read_file', { sandbox_id: id, path: 'bin/all.bytes', encoding: 'base64' });
      assert.deepEqual(Buffer.from(back.content, 'base64'), bytes);
      const asText = await sc.err('read_file', { sandbox_id: id, path: 'bin/all.bytes' });
      assert.match(asText.text, /base64/, 'tells to read binary with encoding base64');
      // An executable script written with write_file runs.
      await sc.ok('write_file', { sandbox_id: id, path: 'run.sh', content: '#!/bin/sh\necho ran\n', executable: true });
      const ran = await sc.ok('execute_command', { sandbox_id: id, command: './run.sh' });
      assert.equal(ran.stdout, 'ran\n');
    });

    test('read_file reads part of a file with offset and length',
      async () => {
        const part = await sc.ok('read_file', { sandbox_id: id, path: 'data/input.txt', offset: 5, length: 3 });
        assert.equal(part.content, 'one');
        assert.equal(part.size, 18);
      });

    test('upload_file copies an allowed host file in; download_file copies back out', async () => {
      const payload = Buffer.concat([Buffer.from('host bytes\0\xff'), Buffer.alloc(70000, 7)]);
      const src = join(host.dir, 'dataset.bin');
      writeFileSync(src, payload);
      const up = await sc.ok('upload_file', { sandbox_id: id, source_path: src, dest_path: 'uploads/dataset.bin' });
      assert.equal(up.size, payload.length);
      const sum = await sc.ok('execute_code', {
        sandbox_id: id,
        code: "import hashlib; print(hashlib.sha256(open('uploads/dataset.bin','rb').read()).hexdigest())",
      });
      assert.equal(sum.stdout.trim(), createHash('sha256').update(payload).digest('hex'));
      // Default destination: the file name in /workspace.
      const up2 = await sc.ok('upload_file', { sandbox_id: id, source_path: src });
      assert.equal(up2.dest_path.replace(/^\/workspace\//, ''), 'dataset.bin');
      const out = join(host.dir, 'roundtrip.bin');
      const down = await sc.ok('download_file', { sandbox_id: id, path: 'uploads/dataset.bin', dest_path: out });
      assert.equal(down.size, payload.length);
      assert.deepEqual(readFileSync(out), payload);
    });

    test('get_sandbox_status with an id reports resource use', async () => {
      const s = await sc.ok('get_sandbox_status', { sandbox_id: id });
      assert.equal(s.sandbox_id, id);
      assert.equal(s.status, 'running');
      for (const k of ['memory_bytes', 'cpu_time_ms', 'processes', 'disk_bytes']) assert.equal(typeof s.usage?.[k], 'number', `usage.${k}: ${JSON.stringify(s)}`);
      assert.ok(s.usage.cpu_time_ms > 0, 'the runs above used CPU');
      assert.ok(s.usage.disk_bytes >= 70000, `the uploaded file counts in disk use: ${s.usage.disk_bytes}`);
    });

    test('install_packages in the sandbox (seed a install_package)', async () => {
      assert.ok(sc.tool('install_packages'), 'install_packages is listed');
      const r = await sc.call('install_packages', { sandbox_id: id, packages: ['sandcastle-no-such-package-e2e'] });
      assert.equal(r.isError, true, 'installing a package no index has fails');
      assert.match(r.text, /sandcastle-no-such-package-e2e/);
    });

    test('close_sandbox frees it; a second close and later use are errors, not fake successes', async () => {
      const c = await sc.ok('close_sandbox', { sandbox_id: id });
      assert.equal(c.sandbox_id, id);
      assert.equal(c.closed, true);
      const again = await sc.err('close_sandbox', { sandbox_id: id });
      assert.match(again.text, /list_sandboxes|create_sandbox/);
      await sc.err('execute_code', { sandbox_id: id, code: 'print(1)' });
      const list = await sc.ok('list_sandboxes');
      assert.ok(!list.sandboxes.some((s) => s.sandbox_id === id));
    });

    test('create_run_close = one-shot execute_code, leaving no sandbox behind', async () => {
      const before = await sc.ok('list_sandboxes');
      const r = await sc.ok('execute_code', { code: 'print(sum(range(10)))' });
      assert.equal(r.stdout, '45\n');
      assert.equal(r.exit_code, 0);
      assert.equal(r.sandbox_id, null, 'one-shot runs report no sandbox to reuse');
      const after = await sc.ok('list_sandboxes');
      assert.equal(after.count, before.count, 'the one-shot sandbox is gone');
    });
  });

  // ---- seed b: sandbox_server (create, write a C file, compile and run with execute_command, close)
  describe('seed b (sandbox_server)', () => {
    const FIB_C = `#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  long a = 0, b = 1;
  for (int i = 0; i < n; i++) { printf("%ld ", a); long t = a + b; a = b; b = t; }
  printf("\\n");
  fprintf(stderr, "computed %d numbers\\n", n);
  return 3;
}
`;
    let id;
    test('create a C sandbox, write fib.c, compile and run it with gcc via execute_command', async () => {
      const s = await sc.create({ language: 'c' });
      id = s.sandbox_id;
      assert.equal(s.language, 'c');
      await sc.ok('write_file', { sandbox_id: id, path: 'fib.c', content: FIB_C });
      const cc = await sc.ok('execute_command', { sandbox_id: id, command: 'gcc -O2 -Wall -o fib fib.c' });
      assert.equal(cc.exit_code, 0, cc.stderr);
      assert.ok(cc.files_created.some((f) => f.path === 'fib'), `the binary is reported: ${JSON.stringify(cc.files_created)}`);
      const run = await sc.ok('execute_command', { sandbox_id: id, command: './fib 10' });
      // Separate streams and a real exit code (seed b mixed them and had none).
      assert.equal(run.stdout, '0 1 1 2 3 5 8 13 21 34 \n');
      assert.equal(run.stderr, 'computed 10 numbers\n');
      assert.equal(run.exit_code, 3);
      assert.equal(run.reason, 'exited');
    });

    test('execute_code in the C sandbox compiles and runs (stage run)', async () => {
      const r = await sc.ok('execute_code', { sandbox_id: id, code: '#include <stdio.h>\nint main(void){puts("hi from c");return 0;}\n' });
      assert.equal(r.stdout, 'hi from c\n');
      assert.equal(r.stage, 'run');
      assert.equal(r.language, 'c');
    });

    test('execute_command honours workdir, env and stdin', async () => {
      const r = await sc.ok('execute_command', {
        sandbox_id: id, command: 'pwd; echo "$GREETING"; cat', workdir: '/tmp', env: { GREETING: 'hello' }, stdin: 'from stdin',
      });
      assert.equal(r.stdout, '/tmp\nhello\nfrom stdin');
      assert.equal(r.exit_code, 0);
    });

    test("seed b's flaw: a filename '../x' does not write outside the workspace", async () => {
      const r = await sc.err('write_file', { sandbox_id: id, path: '../escape.c', content: 'x' });
      assert.match(r.text, /\.\./);
    });

    test('close the C sandbox', async () => {
      assert.equal((await sc.ok('close_sandbox', { sandbox_id: id })).closed, true);
    });

    test('execute_code keeps stdout, stderr and the exit code apart (a non-zero exit is not an error)', async () => {
      const r = await sc.call('execute_code', {
        code: "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\nsys.exit(5)",
      });
      assert.equal(r.isError, false, 'the program ran; its exit code is data');
      assert.equal(r.sc.stdout, 'to out\n');
      assert.equal(r.sc.stderr, 'to err\n');
      assert.equal(r.sc.exit_code, 5);
      assert.equal(r.sc.reason, 'exited');
    });
  });

  // ---- seed c: code-sandbox-mcp (one-shot python / javascript, env pass-through)
  describe('seed c (code-sandbox-mcp)', () => {
    test('one-shot python', async () => {
      const r = await sc.ok('execute_code', { code: 'import platform\nprint("py", platform.python_version_tuple()[0])' });
      assert.equal(r.stdout, 'py 3\n');
      assert.equal(r.language, 'python');
    });

    test('one-shot javascript (and the js alias)', async () => {
      const r = await sc.ok('execute_code', { language: 'javascript', code: 'console.log([1,2,3].map((x) => x * 2).join(","))' });
      assert.equal(r.stdout, '2,4,6\n');
      assert.equal(r.language, 'javascript');
      const a = await sc.ok('execute_code', { language: 'js', code: 'process.stdout.write(String(6*7))' });
      assert.equal(a.stdout, '42');
    });

    test('--pass-through-env copies the named variable; other host variables stay out', async () => {
      const one = await sc.ok('execute_code', {
        code: "import os\nprint(os.environ.get('SC_E2E_PASS'), os.environ.get('SC_E2E_HIDDEN'))",
      });
      assert.equal(one.stdout, `${PASS_VALUE} None\n`);
      const s = await sc.create({ env: { PER_SANDBOX: 'mine' } });
      const env = await sc.ok('execute_command', { sandbox_id: s.sandbox_id, command: 'env' });
      const vars = Object.fromEntries(env.stdout.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
      assert.equal(vars.SC_E2E_PASS, PASS_VALUE);
      assert.equal(vars.PER_SANDBOX, 'mine', 'create_sandbox env is set');
      assert.ok(!env.stdout.includes(HIDDEN_VALUE), 'an unlisted host variable is not visible');
      assert.ok(!('SC_E2E_HIDDEN' in vars));
      assert.notEqual(vars.HOME, process.env.HOME, 'HOME is the sandbox\'s, not the host\'s');
      await sc.ok('close_sandbox', { sandbox_id: s.sandbox_id });
    });
  });

  // ---- seed d: python-mcp-sandbox README "Example Prompt" flow
  describe('seed d (python-mcp-sandbox example prompt)', () => {
    let d;
    let id;
    before(async () => { d = await connectSandcastle(); });
    after(async () => { await d?.close(); });

    test('1. list_sandboxes on a fresh server: none yet', async () => {
      const l = await d.ok('list_sandboxes');
      assert.deepEqual(l.sandboxes, []);
      assert.equal(l.count, 0);
    });

    test('1b. create_sandbox, then list_sandboxes shows it for reuse', async () => {
      const s = await d.create({ name: 'analysis' });
      id = s.sandbox_id;
      const l = await d.ok('list_sandboxes');
      assert.equal(l.count, 1);
      const e = l.sandboxes[0];
      assert.equal(e.sandbox_id, id);
      assert.equal(e.name, 'analysis');
      assert.equal(e.status, 'running');
      assert.ok(Array.isArray(e.packages));
      assert.ok(e.last_used);
    });

    test('2. install_packages in the background (wait: false)', async () => {
      const r = await d.call('install_packages', { sandbox_id: id, packages: ['sandcastle-no-such-package-e2e'], wait: false });
      assert.equal(r.isError, false, r.text);
      assert.match(JSON.stringify(r.sc), /installing|failed/);
    });

    test('3. check_package_installation_status until it settles (failed, with the installer\'s error)', async () => {
      let st;
      for (let i = 0; i < 100; i++) {
        const r = await d.call('check_package_installation_status', { sandbox_id: id, package: 'sandcastle-no-such-package-e2e' });
        assert.equal(r.isError, false, r.text);
        st = r.sc;
        if (!/installing/.test(JSON.stringify(st))) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.match(JSON.stringify(st), /failed/);
      const nf = await d.call('check_package_installation_status', { sandbox_id: id, package: 'never-requested' });
      assert.match(JSON.stringify(nf.sc ?? nf.text), /not_found/);
    });

    test('4. execute code that writes files: files_created lists them with sizes and types', async () => {
      const code = [
        'import os, csv',
        "os.makedirs('results', exist_ok=True)",
        "with open('results/data.csv', 'w', newline='') as f:",
        "    csv.writer(f).writerows([['x', 'y'], [1, 2], [3, 4]])",
        "open('chart.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\"/>')",
        "print('saved')",
      ].join('\n');
      const r = await d.ok('execute_code', { sandbox_id: id, code });
      assert.equal(r.stdout, 'saved\n');
      const byPath = Object.fromEntries(r.files_created.map((f) => [f.path, f]));
      assert.deepEqual(Object.keys(byPath).sort(), ['chart.svg', 'results/data.csv']);
      assert.equal(byPath['results/data.csv'].mime_type, 'text/csv');
      assert.equal(byPath['results/data.csv'].size, 'x,y\r\n1,2\r\n3,4\r\n'.length);
      assert.equal(byPath['results/data.csv'].status, 'created');
      assert.equal(byPath['chart.svg'].mime_type, 'image/svg+xml');
      // The generated file can be fetched (seed d gave HTTP links with the API key in them).
      const rd = await d.ok('read_file', { sandbox_id: id, path: 'results/data.csv' });
      assert.equal(rd.content, 'x,y\r\n1,2\r\n3,4\r\n');
      // A second run that creates nothing reports nothing.
      const again = await d.ok('execute_code', { sandbox_id: id, code: 'print(1)' });
      assert.deepEqual(again.files_created, []);
    });

    test('4b. a same-size rewrite within the same second is reported as modified',
      async () => {
        await d.ok('write_file', { sandbox_id: id, path: 'same.txt', content: 'aaaa' });
        const r = await d.ok('execute_code', { sandbox_id: id, code: "open('same.txt','w').write('bbbb')" });
        assert.deepEqual(r.files_created.map((f) => [f.path, f.status]), [['same.txt', 'modified']]);
      });
  });
});

// seed c: CONTAINER_LANGUAGE (+ CONTAINER_IMAGE) pick the default language.
describe('sandbox tools: CONTAINER_LANGUAGE=javascript', () => {
  let js;
  before(async () => { js = await connectSandcastle({ env: { CONTAINER_LANGUAGE: 'javascript' } }); });
  after(async () => { await js?.close(); });

  test('execute_code without a language runs JavaScript', async () => {
    const r = await js.ok('execute_code', { code: 'console.log(typeof require, 1 + 1)' });
    assert.equal(r.stdout, 'function 2\n');
    assert.equal(r.language, 'javascript');
  });

  test('create_sandbox defaults to javascript, and its schema says so', async () => {
    assert.equal(js.tool('create_sandbox').inputSchema.properties.language.default, 'javascript');
    const s = await js.create();
    assert.equal(s.language, 'javascript');
    const r = await js.ok('execute_code', { sandbox_id: s.sandbox_id, code: 'console.log("in sandbox")' });
    assert.equal(r.stdout, 'in sandbox\n');
    // Another language is still one argument away.
    const py = await js.ok('execute_code', { sandbox_id: s.sandbox_id, language: 'python', code: 'print("py too")' });
    assert.equal(py.stdout, 'py too\n');
  });
});
