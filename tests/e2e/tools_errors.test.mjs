// Every bad input to the sandbox tools, through the official TypeScript SDK v1
// client over stdio: each must be an isError result that says what went wrong
// and what to do next, and nothing may leave the sandbox.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { sleep } from './lib/harness.mjs';
import { UNKNOWN_SANDBOX_HINT, connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

const MiB = 1024 * 1024;
const FILE_LIMIT = 32 * MiB;
const hostFile = (p) => { try { return readFileSync(p, 'utf8'); } catch { return null; } };

// A unique name so probes never collide with anything real on the host.
const PROBE = `sandcastle-e2e-probe-${process.pid}-${Date.now()}`;

describe('sandbox tools: bad inputs (SDK v1)', () => {
  let sc;      // --allow-host-path <tmp> --max-message-bytes 100 MB
  let plain;   // default flags
  let host;
  let id;
  before(async () => {
    host = tempDir('sandcastle-e2e-errors-');
    mkdirSync(join(host.dir, 'allowed'));
    [sc, plain] = await Promise.all([
      connectSandcastle({ args: ['--allow-host-path', join(host.dir, 'allowed'), '--max-message-bytes', String(100 * MiB)] }),
      connectSandcastle(),
    ]);
    id = (await sc.create({ name: 'errs' })).sandbox_id;
  });
  after(async () => {
    await Promise.all([sc?.close(), plain?.close()]);
    host?.cleanup();
  });

  test('an unknown sandbox id is an error on every tool, saying what to do', async () => {
    const calls = {
      get_sandbox_status: {}, close_sandbox: {},
      execute_code: { code: 'print(1)' }, execute_command: { command: 'true' },
      list_files: {}, read_file: { path: 'x' }, write_file: { path: 'x', content: 'x' },
      upload_file: { source_path: join(host.dir, 'allowed', 'nothing') },
      download_file: { path: 'x', dest_path: join(host.dir, 'allowed', 'nothing') },
    };
    for (const [name, args] of Object.entries(calls)) {
      const r = await sc.err(name, { sandbox_id: 'sb-does-not-exist', ...args });
      assert.match(r.text, /sb-does-not-exist/, `${name} names the id: ${r.text}`);
      assert.match(r.text, UNKNOWN_SANDBOX_HINT, `${name} says what to do: ${r.text}`);
      if (r.sc) assert.equal(r.sc.error, 'not_found', name);
    }
    // Tools added later (install_packages, ...) get placeholder arguments.
    const dummy = { string: 'x', array: ['x'], boolean: false, integer: 1, number: 1, object: {} };
    for (const t of sc.tools.filter((t) => t.inputSchema.properties?.sandbox_id && !(t.name in calls))) {
      const args = { sandbox_id: 'sb-does-not-exist' };
      for (const k of t.inputSchema.required ?? []) {
        if (k !== 'sandbox_id') args[k] = dummy[t.inputSchema.properties[k]?.type] ?? 'x';
      }
      const r = await sc.err(t.name, args);
      assert.match(r.text, /sb-does-not-exist/, `${t.name} names the id: ${r.text}`);
      assert.match(r.text, UNKNOWN_SANDBOX_HINT, `${t.name} says what to do: ${r.text}`);
    }
  });

  test('an unknown language lists the available ones', async () => {
    const want = ['python', 'javascript', 'bash', 'sh', 'c', 'cpp'];
    for (const [name, args] of [['execute_code', { code: 'x', language: 'cobol' }], ['create_sandbox', { language: 'cobol' }]]) {
      const r = await sc.err(name, args);
      assert.match(r.text, /cobol/);
      for (const l of want) assert.match(r.text, new RegExp(`\\b${l}\\b`), `${name} lists ${l}: ${r.text}`);
    }
    // A known language whose toolchain this host lacks says so and lists the rest.
    for (const [lang, bin] of [['rust', '/usr/bin/rustc'], ['go', '/usr/bin/go'], ['ruby', '/usr/bin/ruby']]) {
      if (existsSync(bin)) continue;
      const r = await sc.err('execute_code', { code: 'x', language: lang });
      assert.match(r.text, /not installed/);
      assert.match(r.text, /python/);
    }
  });

  describe('path traversal stays inside the sandbox', () => {
    test("'..' is refused by read_file, write_file and list_files", async () => {
      for (const path of ['../../etc/passwd', 'a/../../x', '/workspace/../../etc/passwd', '..']) {
        for (const [name, args] of [['read_file', { path }], ['write_file', { path, content: 'x' }], ['list_files', { path }]]) {
          const r = await sc.call(name, { sandbox_id: id, ...args });
          if (!r.isError) {
            // Only acceptable if it resolved inside the sandbox: never host data.
            assert.notEqual(r.sc?.content, hostFile('/etc/passwd'), `${name} ${path} read the host's passwd`);
          } else {
            assert.match(r.text, /\.\.|not allowed|outside/, `${name} ${path}: ${r.text}`);
          }
        }
      }
      assert.ok(!existsSync('/x') && !existsSync(join(host.dir, 'x')));
    });

    test('absolute paths name the sandbox\'s own files, never the host\'s', async () => {
      const shadow = await sc.call('read_file', { sandbox_id: id, path: '/etc/shadow' });
      if (!shadow.isError) assert.notEqual(shadow.sc.content, hostFile('/etc/shadow'));
      assert.ok(!shadow.text.includes('root:$'), 'no password hash');
      const passwd = await sc.ok('read_file', { sandbox_id: id, path: '/etc/passwd' });
      assert.notEqual(passwd.content, hostFile('/etc/passwd'), 'the sandbox has its own minimal /etc/passwd');
      const hn = await sc.call('read_file', { sandbox_id: id, path: '/etc/hostname' });
      if (!hn.isError) assert.notEqual(hn.sc.content.trim(), hostname(), 'not the host\'s hostname');
      const root = await sc.ok('list_files', { sandbox_id: id, path: '/' });
      const names = root.files.map((f) => f.name);
      assert.ok(names.includes('workspace'));
      for (const hostOnly of ['work', 'boot', 'srv']) {
        if (existsSync(`/${hostOnly}`)) assert.ok(!names.includes(hostOnly), `host /${hostOnly} is not visible: ${names}`);
      }
      // The sandbox's /opt holds only the server's read-only shared files, never the host's /opt.
      const opt = await sc.ok('list_files', { sandbox_id: id, path: '/opt' });
      assert.deepEqual(opt.files.map((f) => f.name), ['sandcastle']);
      const magic = await sc.err('read_file', { sandbox_id: id, path: '/proc/self/root/etc/hostname' });
      assert.ok(!magic.text.includes(hostname() + '\n'));
      // Writes to the read-only system tree fail and never reach the host.
      await sc.err('write_file', { sandbox_id: id, path: `/usr/bin/${PROBE}`, content: 'x' });
      const etc = await sc.call('write_file', { sandbox_id: id, path: `/etc/${PROBE}`, content: 'x' });
      assert.ok(!existsSync(`/usr/bin/${PROBE}`) && !existsSync(`/etc/${PROBE}`), `host untouched (${etc.text})`);
    });

    test('symlinks made inside /workspace (ln -s) cannot reach host files', async () => {
      const ln = await sc.ok('execute_command', {
        sandbox_id: id,
        command: 'ln -s / rootlink && ln -s /etc etclink && ln -s /proc/1/root proclink && ln -s ../../../../../.. up && ln -s /etc/passwd pw && ls -l',
      });
      assert.equal(ln.exit_code, 0, ln.stderr);
      const reads = ['rootlink/etc/passwd', 'etclink/passwd', 'up/etc/passwd', 'pw', 'rootlink/etc/hostname',
        'etclink/shadow', 'proclink/etc/passwd', 'proclink/etc/hostname'];
      for (const path of reads) {
        const r = await sc.call('read_file', { sandbox_id: id, path });
        const text = r.sc?.content ?? r.text;
        assert.notEqual(text, hostFile('/etc/passwd'), `${path} must not read the host's passwd`);
        assert.notEqual(text, hostFile('/etc/shadow'), `${path} must not read the host's shadow`);
        if (path.endsWith('hostname') && !r.isError) assert.notEqual(text.trim(), hostname(), `${path}: host hostname`);
        assert.ok(!/root:\$/.test(text), `${path}: no password hash`);
      }
      for (const path of ['rootlink', 'up']) {
        const r = await sc.call('list_files', { sandbox_id: id, path });
        if (!r.isError && existsSync('/work')) assert.ok(!r.sc.files.some((f) => f.name === 'work'), `${path} lists the host root`);
      }
      // Writing through the links lands in the sandbox (or fails), never on the host.
      for (const path of [`rootlink/usr/bin/${PROBE}`, `etclink/${PROBE}`, `up/tmp/${PROBE}`, `proclink/tmp/${PROBE}`]) {
        await sc.call('write_file', { sandbox_id: id, path, content: 'probe' });
      }
      for (const p of [`/usr/bin/${PROBE}`, `/etc/${PROBE}`, `/tmp/${PROBE}`]) assert.ok(!existsSync(p), `${p} appeared on the host`);
    });

    test('upload_file/download_file without --allow-host-path say how to allow a directory', async () => {
      const s = await plain.create();
      for (const [name, args] of [['upload_file', { source_path: '/etc/hostname' }], ['download_file', { path: '/etc/passwd', dest_path: `/tmp/${PROBE}` }]]) {
        const r = await plain.err(name, { sandbox_id: s.sandbox_id, ...args });
        assert.match(r.text, /--allow-host-path/);
      }
      assert.ok(!existsSync(`/tmp/${PROBE}`));
    });

    test('upload_file/download_file outside the allowed directory, via .. or via symlinks, are refused', async () => {
      const allowed = join(host.dir, 'allowed');
      writeFileSync(join(host.dir, 'secret.txt'), 'outside the allowed dir');
      symlinkSync('/etc/hostname', join(allowed, 'link-to-etc-hostname'));
      symlinkSync(join(host.dir, 'secret.txt'), join(allowed, 'link-to-secret'));
      symlinkSync('/etc', join(allowed, 'etcdir'));
      symlinkSync(host.dir, join(allowed, 'parent'));
      const sources = ['/etc/hostname', join(host.dir, 'secret.txt'), `${allowed}/../secret.txt`,
        join(allowed, 'link-to-etc-hostname'), join(allowed, 'link-to-secret'), join(allowed, 'etcdir', 'hostname'),
        join(allowed, 'parent', 'secret.txt'), 'relative/path.txt'];
      for (const source_path of sources) {
        const r = await sc.err('upload_file', { sandbox_id: id, source_path, dest_path: 'stolen.txt' });
        assert.match(r.text, /allowed|absolute|outside|symlink/, `${source_path}: ${r.text}`);
      }
      const rd = await sc.call('read_file', { sandbox_id: id, path: 'stolen.txt' });
      assert.equal(rd.isError, true, 'nothing was copied in');
      // Downloads cannot write outside either, nor through a symlink.
      await sc.ok('write_file', { sandbox_id: id, path: 'out.txt', content: 'from the sandbox' });
      for (const dest_path of [join(host.dir, 'escaped.txt'), `${allowed}/../escaped.txt`, join(allowed, 'link-to-secret'), join(allowed, 'parent', 'escaped.txt')]) {
        const r = await sc.err('download_file', { sandbox_id: id, path: 'out.txt', dest_path });
        assert.match(r.text, /allowed|outside|symlink/, `${dest_path}: ${r.text}`);
      }
      assert.ok(!existsSync(join(host.dir, 'escaped.txt')));
      assert.equal(readFileSync(join(host.dir, 'secret.txt'), 'utf8'), 'outside the allowed dir', 'symlink target untouched');
    });
  });

  test('a write over 32 MiB is refused naming the limit (text and base64)', async () => {
    const text = 'x'.repeat(FILE_LIMIT + 1);
    const r = await sc.err('write_file', { sandbox_id: id, path: 'big.txt', content: text });
    assert.match(r.text, new RegExp(String(FILE_LIMIT)), r.text);
    assert.match(r.text, /limit/);
    const b64 = Buffer.alloc(FILE_LIMIT + 1, 1).toString('base64');
    const rb = await sc.err('write_file', { sandbox_id: id, path: 'big.bin', content: b64, encoding: 'base64' });
    assert.match(rb.text, new RegExp(String(FILE_LIMIT)));
    assert.equal((await sc.call('read_file', { sandbox_id: id, path: 'big.txt' })).isError, true, 'nothing written');
  });

  test('reading a file over the limit says to read it in parts', async () => {
    await sc.ok('execute_command', { sandbox_id: id, command: `head -c ${FILE_LIMIT + 4096} /dev/zero > huge.bin` });
    const r = await sc.err('read_file', { sandbox_id: id, path: 'huge.bin', encoding: 'base64' });
    assert.match(r.text, /offset/);
    assert.match(r.text, new RegExp(String(FILE_LIMIT)));
    await sc.ok('execute_command', { sandbox_id: id, command: 'rm huge.bin' });
  });

  test('with default flags, a 17 MiB write fits, and a message over the 64 MiB limit gets an answer to its request', async () => {
    const s = await plain.create();
    const ok = await plain.call('write_file', { sandbox_id: s.sandbox_id, path: 'big.txt', content: 'x'.repeat(17 * MiB) }, { timeout: 20000 });
    assert.equal(ok.isError, false, ok.text.slice(0, 300));
    assert.equal(ok.sc.size, 17 * MiB);
    const t0 = performance.now();
    // The SDK matches the error to this call only if it carries the call's id.
    await assert.rejects(
      plain.call('write_file', { sandbox_id: s.sandbox_id, path: 'huge.txt', content: 'x'.repeat(70 * MiB) }, { timeout: 20000 }),
      (e) => e.code === -32600 && /exceeds the limit of 67108864 bytes/.test(e.message));
    assert.ok(performance.now() - t0 < 15000, 'answered, not timed out');
  });

  test('timeout: sleep 10 with timeout_s 1 is killed in about 1 s, isError, reason timeout', async () => {
    const t0 = performance.now();
    const r = await sc.err('execute_code', { code: 'import time\nprint("before", flush=True)\ntime.sleep(10)\nprint("after")', timeout_s: 1 });
    const ms = performance.now() - t0;
    assert.ok(ms >= 900 && ms < 3000, `took ${ms.toFixed(0)} ms`);
    assert.equal(r.sc.reason, 'timeout');
    assert.equal(r.sc.stdout, 'before\n', 'output before the kill is kept');
    assert.match(r.text, /timeout_s/, 'says how to give it more time');
    // execute_command too, and the sandbox stays usable.
    const c = await sc.err('execute_command', { sandbox_id: id, command: 'sleep 10', timeout_s: 1 });
    assert.equal(c.sc.reason, 'timeout');
    const after = await sc.ok('execute_command', { sandbox_id: id, command: 'echo alive' });
    assert.equal(after.stdout, 'alive\n');
  });

  test('a C compile error: isError, stage compile, gcc\'s message in stderr, nothing run', async () => {
    const r = await sc.err('execute_code', { language: 'c', code: 'int main(void) { puts("ran"); return undeclared_thing; }\n' });
    assert.equal(r.sc.stage, 'compile');
    assert.notEqual(r.sc.exit_code, 0);
    assert.match(r.sc.stderr, /error:.*undeclared_thing/);
    assert.equal(r.sc.stdout, '');
    const cpp = await sc.err('execute_code', { sandbox_id: id, language: 'cpp', code: 'int main() { return nope(); }' });
    assert.equal(cpp.sc.stage, 'compile');
    assert.match(cpp.sc.stderr, /nope/);
  });

  test('a one-shot compile error reports sandbox_id null, like a one-shot run',
    async () => {
      const r = await sc.err('execute_code', { language: 'c', code: 'int main(void) { return x; }' });
      assert.equal(r.sc.sandbox_id, null);
    });

  test('too many sandboxes: the third create with --max-sandboxes 2 says to close one', async () => {
    const cap = await connectSandcastle({ args: ['--max-sandboxes', '2'] });
    try {
      const a = await cap.create();
      await cap.create();
      const r = await cap.err('create_sandbox', {});
      assert.match(r.text, /2/);
      assert.match(r.text, /close_sandbox/);
      // A one-shot run needs a slot too: it waits for one up to its own timeout.
      const oneShot = await cap.err('execute_code', { code: 'print(1)', timeout_s: 0.5 });
      assert.match(oneShot.text, /waited 0\.\d s in line for a sandbox/);
      assert.match(oneShot.text, /close_sandbox/);
      await cap.ok('close_sandbox', { sandbox_id: a.sandbox_id });
      await cap.create();
    } finally {
      await cap.close();
    }
  });

  test('an output flood (5 MB) is truncated to about 1 MiB, head and tail kept', async () => {
    const t0 = performance.now();
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'import sys\nfor i in range(650000): sys.stdout.write(f"{i:07d}\\n")' });
    const ms = performance.now() - t0;
    assert.equal(r.truncated, true);
    assert.equal(r.stdout_bytes, 650000 * 8);
    assert.ok(r.stdout.length <= 1.05 * MiB, `stdout kept ${r.stdout.length} chars`);
    assert.ok(r.stdout.startsWith('0000000\n0000001\n'), 'head kept');
    assert.ok(r.stdout.endsWith('0649999\n'), 'tail kept');
    assert.equal(r.exit_code, 0);
    assert.ok(ms < 5000, `took ${ms.toFixed(0)} ms`);
  });

  test('cancellation: aborting a long execute_code rejects fast, kills the run, the sandbox stays usable', async () => {
    await sc.ok('execute_code', { sandbox_id: id, code: 'print("warm")' });
    const before = (await sc.ok('get_sandbox_status', { sandbox_id: id })).usage.processes;
    const ac = new AbortController();
    const t0 = performance.now();
    const call = sc.call('execute_code', { sandbox_id: id, code: 'import time\ntime.sleep(30)' }, { signal: ac.signal });
    await sleep(300);
    ac.abort('test cancels');
    await assert.rejects(call);
    assert.ok(performance.now() - t0 < 1500, 'rejects well before the sleep ends');
    const req = sc.wire.out.findLast((m) => m.params?.name === 'execute_code' && m.params?.arguments?.code?.includes('sleep(30)'));
    assert.ok(sc.wire.out.some((m) => m.method === 'notifications/cancelled' && m.params.requestId === req.id), 'the SDK sent notifications/cancelled');
    // The sandbox's kernel was interrupted, so the next cell runs at once.
    const t1 = performance.now();
    const after = await sc.ok('execute_code', { sandbox_id: id, code: 'print("still here")' });
    assert.equal(after.stdout, 'still here\n');
    assert.ok(performance.now() - t1 < 2000, 'the cancelled cell no longer occupies the kernel');
    await sleep(100);
    assert.ok(!sc.wire.in.some((m) => m.id === req.id), 'no response for the cancelled request');
    const st = await sc.ok('get_sandbox_status', { sandbox_id: id });
    // Nothing of the cancelled run is left beside the live kernel.
    assert.ok(st.usage.processes <= before, `${st.usage.processes} processes now, ${before} before the run`);
    // A cancelled one-shot run leaves no sandbox behind.
    const n0 = (await sc.ok('list_sandboxes')).count;
    const ac2 = new AbortController();
    const one = sc.call('execute_code', { code: 'import time\ntime.sleep(30)' }, { signal: ac2.signal });
    await sleep(300);
    ac2.abort();
    await assert.rejects(one);
    await sleep(200);
    assert.equal((await sc.ok('list_sandboxes')).count, n0);
    const gs = await sc.ok('get_sandbox_status', {});
    assert.equal(gs.server_live_sandboxes, n0, 'the one-shot sandbox was destroyed');
  });

  test('invalid arguments name the field', async () => {
    const cases = [
      ['execute_code', { code: 'print(1)', timeout_s: 0.01 }, /timeout_s/],
      ['execute_code', {}, /code/],
      ['execute_command', { sandbox_id: id, command: '' }, /command/],
      ['write_file', { sandbox_id: id, path: 'x', content: '%%%', encoding: 'base64' }, /base64/],
      ['read_file', { sandbox_id: id, path: 'x', encoding: 'hex' }, /encoding/],
      ['create_sandbox', { limits: { memory_mb: 1 } }, /memory_mb/],
      ['create_sandbox', { bogus: 1 }, /bogus/],
    ];
    for (const [name, args, field] of cases) {
      const r = await sc.err(name, args);
      assert.match(r.text, field, `${name} ${JSON.stringify(args)}: ${r.text}`);
    }
    const dir = await sc.err('read_file', { sandbox_id: id, path: '/workspace' });
    assert.match(dir.text, /list_files/);
  });

  test('file errors from the engine say what to do next, not only the errno',
    async () => {
      const missing = await sc.err('read_file', { sandbox_id: id, path: 'no/such/file.txt' });
      assert.match(missing.text, /list_files/, missing.text);
      const ro = await sc.err('write_file', { sandbox_id: id, path: '/usr/local/x.txt', content: 'x' });
      assert.match(ro.text, /\/workspace/, ro.text);
    });

  // Was a bug until a4b783d: error results carried structuredContent
  // {error, message}, which failed each tool's outputSchema, so the v1
  // client.callTool threw -32602 instead of returning the isError result.
  test('SDK v1 callTool returns isError results (structuredContent of an error matches the outputSchema or is absent)',
    async () => {
      for (const [name, args] of [['close_sandbox', { sandbox_id: 'sb-does-not-exist' }],
        ['read_file', { sandbox_id: id, path: '../x' }], ['execute_code', { code: 'x', language: 'cobol' }]]) {
        const r = await sc.sdkCall(name, args);
        assert.equal(r.isError, true, name);
        assert.ok(r.text.length > 0);
      }
    });
});
