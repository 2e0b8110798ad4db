// --profile seed-c: code-sandbox-mcp's face (../shared/seeds/003, notes in
// ../shared/notes/peers.md section c). tools/list is exactly its tools
// (run_js_code as its README names it, run_javascript_code as its code
// does); its README's examples are replayed through the official SDK v1
// client over stdio: output as text, failures as llm-sandbox's JSON, and the
// resource sandbox://environments.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const PASS_VALUE = 'seed-c-pass-4411';

describe('--profile seed-c (code-sandbox-mcp)', () => {
  let sc;
  before(async () => {
    sc = await connectSandcastle({
      args: ['--profile', 'seed-c', '--pass-through-env', 'API_KEY'],
      env: { API_KEY: PASS_VALUE, SC_E2E_HIDDEN: 'hidden' },
    });
  });
  after(async () => { await sc?.close(); });

  test('tools/list is exactly run_python_code, run_js_code and run_javascript_code', () => {
    assert.deepEqual(sc.tools.map((t) => t.name).sort(), ['run_javascript_code', 'run_js_code', 'run_python_code']);
    for (const t of sc.tools) {
      assert.deepEqual(t.inputSchema.required, ['code']);
      assert.deepEqual(Object.keys(t.inputSchema.properties), ['code']);
      assert.ok(t.description.includes('sandbox'), t.name);
      assert.equal(t.outputSchema, undefined, 'the seed returns text');
    }
  });

  test('the server\'s instructions name the tools', () => {
    const instructions = sc.client.getInstructions();
    assert.match(instructions, /run_python_code/);
    assert.match(instructions, /sandbox:\/\/environments/);
  });

  test('README example: run_python_code prints Hello, World!', async () => {
    const r = await sc.sdkCall('run_python_code', { code: "print('Hello, World!')" });
    assert.equal(r.isError, false);
    assert.deepEqual(r.raw.content, [{ type: 'text', text: 'Hello, World!' }]);
  });

  test('README example: run_js_code and run_javascript_code run Node.js', async () => {
    for (const name of ['run_js_code', 'run_javascript_code']) {
      const r = await sc.sdkCall(name, { code: "console.log('Hello, World!');" });
      assert.equal(r.isError, false, `${name}: ${r.text}`);
      assert.equal(r.text, 'Hello, World!', name);
    }
  });

  test('no output is the seed\'s hint, with the real exit code', async () => {
    const py = await sc.sdkCall('run_python_code', { code: 'x = 1' });
    assert.equal(py.isError, false);
    assert.equal(py.text, '{\n  "exit_code": 0,\n  "stderr": "No output, forgot print()?",\n  "stdout": ""\n}');
    const js = await sc.sdkCall('run_js_code', { code: 'let x = 1;' });
    assert.equal(JSON.parse(js.text).stderr, 'No output, forgot console.logs?');
  });

  test('a failure is {exit_code, stderr, stdout} with the real exit code and stdout kept', async () => {
    const r = await sc.call('run_python_code', { code: 'import sys\nprint("partial")\nraise ValueError("bad input")' });
    assert.equal(r.isError, true);
    const j = JSON.parse(r.text);
    assert.deepEqual(Object.keys(j), ['exit_code', 'stderr', 'stdout']);
    assert.equal(j.exit_code, 1);
    assert.match(j.stderr, /ValueError: bad input/);
    assert.equal(j.stdout, 'partial');
    const exit3 = await sc.call('run_python_code', { code: 'import sys\nsys.exit(3)' });
    assert.equal(JSON.parse(exit3.text).exit_code, 3);
    const js = await sc.call('run_javascript_code', { code: 'process.exit(4)' });
    assert.equal(JSON.parse(js.text).exit_code, 4);
  });

  test('nothing persists between calls (a fresh sandbox each time)', async () => {
    await sc.sdkCall('run_python_code', { code: "open('/workspace/left.txt','w').write('x'); print('wrote')" });
    const r = await sc.sdkCall('run_python_code', { code: "import os\nprint(os.path.exists('/workspace/left.txt'))" });
    assert.equal(r.text, 'False');
  });

  test('--pass-through-env passes the named variable, and only it', async () => {
    const r = await sc.sdkCall('run_python_code', { code: "import os\nprint(os.environ.get('API_KEY'), os.environ.get('SC_E2E_HIDDEN'))" });
    assert.equal(r.text, `${PASS_VALUE} None`);
  });

  test('resource sandbox://environments lists each language\'s image and libraries', async () => {
    const { resources } = await sc.client.listResources();
    assert.deepEqual(resources.map((r) => r.uri), ['sandbox://environments']);
    const read = await sc.client.readResource({ uri: 'sandbox://environments' });
    const env = JSON.parse(read.contents[0].text);
    assert.deepEqual(Object.keys(env).sort(), ['javascript', 'python']);
    for (const lang of ['python', 'javascript']) {
      assert.equal(env[lang].image, 'host');
      assert.equal(typeof env[lang].installed_libraries, 'string');
    }
    await assert.rejects(sc.client.readResource({ uri: 'sandbox://sb-1/x.txt' }), /Resource not found.*one resource/);
  });
});
