// --profile seed-b: sandbox_server's face (../shared/seeds/002), over stdio
// as there, with the official SDK v1 client. tools/list is exactly its six
// tools; its README's workflow is replayed step by step on its plain-text
// results; its flaws stay out (a '../' filename, output without exit code).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

const SEED_B_TOOLS = [
  'create_container_environment', 'create_file_in_container', 'execute_command_in_container',
  'save_container_state', 'export_dockerfile', 'exit_container',
];

const CREATED = /^Container created with ID: (\S+)\nWorking directory is \/workspace\nContainer is ready for commands/;

describe('profile seed-b (sandbox_server)', () => {
  let sc;
  let id;
  let state;
  before(async () => {
    // Its own state directory: persistent sandboxes belong to one server per directory.
    state = tempDir('sandcastle-e2e-seed-b-');
    sc = await connectSandcastle({ args: ['--profile', 'seed-b', '--state-dir', state.dir], timeoutMs: 60000 });
  });
  after(async () => {
    await sc?.close();
    state?.cleanup();
  });

  const text = async (name, args) => {
    const r = await sc.call(name, args);
    assert.equal(r.isError, false, `${name}: ${r.text}`);
    assert.equal(r.sc, undefined, `${name} answers in plain text, as the seed`);
    return r.text;
  };

  test('tools/list is exactly the seed\'s six tools, with its argument names', () => {
    assert.deepEqual(sc.tools.map((t) => t.name).sort(), [...SEED_B_TOOLS].sort());
    const props = (n) => Object.keys(sc.tool(n).inputSchema.properties).sort();
    assert.deepEqual(props('create_container_environment'), ['image', 'persist']);
    assert.deepEqual(props('create_file_in_container'), ['container_id', 'content', 'filename']);
    assert.deepEqual(props('execute_command_in_container'), ['command', 'container_id']);
    assert.deepEqual(props('save_container_state'), ['container_id', 'name']);
    assert.deepEqual(props('export_dockerfile'), ['container_id']);
    assert.deepEqual(props('exit_container'), ['container_id', 'force']);
    for (const t of sc.tools) assert.ok(t.annotations, `${t.name} has annotations`);
    assert.equal(sc.tool('exit_container').annotations.destructiveHint, true);
  });

  test('"create a Python container": python:3.9-slim, the host standing in for the image', async () => {
    const t = await text('create_container_environment', { image: 'python:3.9-slim', persist: false });
    const m = t.match(CREATED);
    assert.ok(m, t);
    id = m[1];
    assert.match(t, /Image python:3\.9-slim is not in sandcastle's image store.*image 'host'/s);
    assert.match(t, /sandcastle image pull python:3\.9-slim/);
  });

  test('"write a simple hello world program" and run it', async () => {
    assert.equal(await text('create_file_in_container', { container_id: id, filename: 'hello.py', content: 'print("Hello, World!")\n' }),
      'File hello.py has been created in /workspace');
    assert.equal(await text('execute_command_in_container', { container_id: id, command: 'python3 hello.py' }), 'Hello, World!\n');
  });

  test('"a C program that calculates the fibonacci sequence", compiled and run', async () => {
    const src = '#include <stdio.h>\nint main(void){long a=0,b=1;for(int i=0;i<10;i++){printf("%ld ",a);long t=a+b;a=b;b=t;}puts("");return 0;}\n';
    await text('create_file_in_container', { container_id: id, filename: 'src/fib.c', content: src });
    assert.equal(await text('execute_command_in_container', { container_id: id, command: 'gcc -O2 -o fib src/fib.c && ./fib' }),
      '0 1 1 2 3 5 8 13 21 34 \n');
  });

  test('output is stdout then stderr, and a failing command says its exit code', async () => {
    assert.equal(await text('execute_command_in_container', { container_id: id, command: 'echo out; echo err >&2; exit 3' }),
      'out\nerr\n[exit code 3]');
    // A shell as the command line (the seed split it without one), in /workspace.
    assert.equal(await text('execute_command_in_container', { container_id: id, command: 'pwd && ls hello.py' }),
      '/workspace\nhello.py\n');
  });

  test('a filename leaving /workspace is refused (the seed wrote "../x" outside its folder)', async () => {
    for (const filename of ['../escape.txt', '/etc/escape.txt']) {
      const r = await sc.call('create_file_in_container', { container_id: id, filename, content: 'x' });
      assert.equal(r.isError, true, filename);
      assert.match(r.text, /^Error creating file: .*relative to \/workspace/, r.text);
    }
  });

  test('"export a Dockerfile that recreates this environment": base, files, how to build', async () => {
    const t = await text('export_dockerfile', { container_id: id });
    assert.match(t, /^Here's a Dockerfile to recreate this environment:\n\n(#.*\n)*FROM \S+\n/);
    assert.match(t, /\nWORKDIR \/workspace\n/);
    assert.match(t, /\nCOPY /);
    assert.match(t, /To use this Dockerfile:\n1\. Get its build context .*context\.tar\.gz/s);
    assert.match(t, /docker build -t your-image-name ctx/);
  });

  test('"save the current container state": on the host userland it says what to do', async () => {
    const r = await sc.call('save_container_state', { container_id: id, name: 'ds-workspace:v1' });
    // A sandbox on image 'host' has only /workspace to save and needs a store image
    // to put it on; the store here is empty, so the error must say how to get one.
    assert.equal(r.isError, true, r.text);
    assert.match(r.text, /^Error saving container: .*base.*create the container from an image in sandcastle.s store/s);
  });

  test('a persistent container says it is kept until exit_container', async () => {
    const t = await text('create_container_environment', { image: 'ubuntu:latest', persist: true });
    const pid = t.match(CREATED)[1];
    assert.match(t, /Persistent: .*until exit_container/);
    assert.equal(await text('exit_container', { container_id: pid }), `Container ${pid} has been stopped and removed.`);
  });

  test('an image neither in the store nor stood in for: the error says how to add it', async () => {
    const r = await sc.call('create_container_environment', { image: 'example.org/nosuch:1', persist: false });
    assert.equal(r.isError, true);
    assert.match(r.text, /^Error: Image example\.org\/nosuch:1 not found\. .*sandcastle image pull example\.org\/nosuch:1/s);
  });

  test('exit_container removes it; its id is then "not found" with what to do', async () => {
    assert.equal(await text('exit_container', { container_id: id, force: true }), `Container ${id} has been stopped and removed.`);
    const r = await sc.call('execute_command_in_container', { container_id: id, command: 'true' });
    assert.equal(r.isError, true);
    assert.match(r.text, new RegExp(`^Container ${id} not found: .*create_container_environment`));
  });
});
