// Stateful kernels and rich results (issue 5), end to end through the official
// TypeScript SDK v1 client over stdio: state across calls, matplotlib figures
// as image content, DataFrame reprs, created files as resource links read back
// through resources/read, live progress, cancellation, a crashing kernel, the
// JavaScript kernel.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CallToolResultSchema, ListResourceTemplatesResultSchema, ReadResourceResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function pngSize(buf) {
  // IHDR: width and height at bytes 16..23.
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

describe('kernels: Python (SDK v1)', () => {
  let sc;
  let id;
  before(async () => {
    sc = await connectSandcastle({ timeoutMs: 60000 });
    id = (await sc.create({ language: 'python' })).sandbox_id;
  });
  after(async () => { await sc?.close(); });

  const run = (code, extra = {}, opts = {}) => sc.call('execute_code', { sandbox_id: id, code, ...extra }, opts);

  test('state persists across three calls; the last expression is the result; execution_count rises', async () => {
    const a = await sc.ok('execute_code', { sandbox_id: id, code: 'import math\nx = 40\ndef double(v):\n    return v * 2' });
    assert.equal(a.mode, 'kernel');
    const b = await sc.ok('execute_code', { sandbox_id: id, code: 'x += 1\nprint("x is", x)' });
    assert.equal(b.stdout, 'x is 41\n');
    const c = await sc.ok('execute_code', { sandbox_id: id, code: 'double(x) + math.floor(0.5)' });
    assert.deepEqual(c.result, { 'text/plain': '82' });
    assert.equal(c.stdout, '');
    assert.equal(c.exit_code, 0);
    assert.ok(b.execution_count === a.execution_count + 1 && c.execution_count === b.execution_count + 1,
      `execution_count ${a.execution_count} ${b.execution_count} ${c.execution_count}`);
  });

  test('an exception comes back as error {name, value, traceback} trimmed to the user code; the kernel lives on', async () => {
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'def f():\n    return 1 / 0\nf()' });
    assert.equal(r.error.name, 'ZeroDivisionError');
    assert.equal(r.error.value, 'division by zero');
    const tb = r.error.traceback.join('');
    assert.match(tb, /<cell-\d+>/);
    assert.doesNotMatch(tb, /python_driver/, 'no driver frames');
    assert.equal(r.exit_code, 1);
    assert.equal((await sc.ok('execute_code', { sandbox_id: id, code: 'x' })).result['text/plain'], '41');
  });

  // A warm call lists the workspace once: the listing the previous call
  // ended with is its "before", unless another tool used the sandbox since.
  test('files written between calls: by the kernel\'s own thread, reported by the next call; by write_file, not', async () => {
    await sc.ok('execute_code', { sandbox_id: id, code: 'import threading, time\n'
      + 'threading.Thread(target=lambda: (time.sleep(0.2), open("later.txt", "w").write("bg"))).start()' });
    // Nothing may use the sandbox in between (that is what is tested), so
    // there is no event to wait on here: the thread writes after 0.2 s.
    await sleep(1500);
    const next = await sc.ok('execute_code', { sandbox_id: id, code: '1' });
    assert.deepEqual(next.files_created.map((f) => [f.path, f.status]), [['later.txt', 'created']]);
    await sc.ok('write_file', { sandbox_id: id, path: 'by_tool.txt', content: 'tool' });
    const after = await sc.ok('execute_code', { sandbox_id: id, code: '2' });
    assert.deepEqual(after.files_created, [], 'a file another tool wrote is not the cell\'s');
    const again = await sc.ok('execute_code', { sandbox_id: id, code: 'open("by_tool.txt", "a").write("!")' });
    assert.deepEqual(again.files_created.map((f) => [f.path, f.status]), [['by_tool.txt', 'modified']]);
  });

  test('a matplotlib plot comes back as a decodable PNG image content, never as base64 in text', async () => {
    const code = 'import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3), dpi=50)\nax.plot([1, 3, 2])\nax.set_title("e2e")';
    const r = await run(code);
    assert.equal(r.isError, false, r.text.slice(0, 500));
    const images = r.raw.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 1, 'one figure, one image');
    assert.equal(images[0].mimeType, 'image/png');
    const png = Buffer.from(images[0].data, 'base64');
    assert.ok(png.subarray(0, 8).equals(PNG_MAGIC), 'PNG signature');
    const { width, height } = pngSize(png);
    assert.ok(width > 100 && width <= 200 && height > 80 && height <= 150, `size ${width}x${height}`);
    assert.ok(!r.text.includes(images[0].data.slice(0, 64)), 'the image data is not in the text');
    assert.equal(r.sc.displays.length, 1);
    assert.equal(r.sc.displays[0]['image/png'].content_index, r.raw.content.indexOf(images[0]));
    // Figures are closed after each call: the next call returns no image.
    const again = await run('1');
    assert.equal(again.raw.content.filter((c) => c.type === 'image').length, 0);
  });

  test("a DataFrame's repr: text/plain and text/html; display() adds more", async () => {
    const r = await sc.ok('execute_code', {
      sandbox_id: id,
      code: 'import pandas as pd\ndf = pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3, 19]})\ndisplay(df.describe())\ndf',
    });
    assert.match(r.result['text/plain'], /city\s+temp/);
    assert.match(r.result['text/plain'], /Oslo\s+3/);
    assert.match(r.result['text/html'], /<table/);
    assert.equal(r.displays.length, 1);
    assert.match(r.displays[0]['text/plain'], /mean/);
  });

  test('a file created by code is listed, linked as a resource, and read back through resources/read', async () => {
    const r = await run('import matplotlib.pyplot as plt\nopen("report.txt", "w").write("hello from the kernel\\n")\n'
      + 'plt.figure(figsize=(2, 2), dpi=40); plt.plot([0, 1]); plt.savefig("plot.png"); plt.close("all")');
    assert.equal(r.isError, false, r.text.slice(0, 400));
    const byPath = Object.fromEntries(r.sc.files_created.map((f) => [f.path, f]));
    assert.deepEqual(Object.keys(byPath).sort(), ['plot.png', 'report.txt']);
    assert.equal(byPath['report.txt'].mime_type, 'text/plain');
    assert.equal(byPath['report.txt'].size, 22);
    assert.equal(byPath['report.txt'].uri, `sandbox://${id}/report.txt`);
    const links = r.raw.content.filter((c) => c.type === 'resource_link');
    assert.deepEqual(links.map((l) => l.uri).sort(), [`sandbox://${id}/plot.png`, `sandbox://${id}/report.txt`]);
    const txt = await sc.client.request({ method: 'resources/read', params: { uri: `sandbox://${id}/report.txt` } }, ReadResourceResultSchema);
    assert.equal(txt.contents[0].text, 'hello from the kernel\n');
    const bin = await sc.client.request({ method: 'resources/read', params: { uri: `sandbox://${id}/plot.png` } }, ReadResourceResultSchema);
    assert.equal(bin.contents[0].mimeType, 'image/png');
    assert.ok(Buffer.from(bin.contents[0].blob, 'base64').subarray(0, 8).equals(PNG_MAGIC));
    // Unknown sandboxes and files are "resource not found".
    await assert.rejects(sc.client.request({ method: 'resources/read', params: { uri: 'sandbox://sb-nope/report.txt' } }, ReadResourceResultSchema),
      (e) => e.code === -32002);
    await assert.rejects(sc.client.request({ method: 'resources/read', params: { uri: `sandbox://${id}/missing.txt` } }, ReadResourceResultSchema),
      (e) => e.code === -32002);
  });

  test('resources/templates/list advertises sandbox://{sandbox_id}/{path}', async () => {
    const t = await sc.client.request({ method: 'resources/templates/list', params: {} }, ListResourceTemplatesResultSchema);
    assert.ok(t.resourceTemplates.some((x) => x.uriTemplate === 'sandbox://{sandbox_id}/{path}'));
    assert.ok(sc.client.getServerCapabilities().resources, 'resources capability declared');
  });

  test('progress notifications arrive in order while a 2-second loop prints every 100 ms', async () => {
    const seen = [];
    const t0 = performance.now();
    const r = await sc.client.request({
      method: 'tools/call',
      params: { name: 'execute_code', arguments: { sandbox_id: id, code: 'import time\nfor i in range(20):\n    print("tick", i)\n    time.sleep(0.1)' } },
    }, CallToolResultSchema, { timeout: 30000, onprogress: (p) => seen.push({ ...p, at: performance.now() - t0 }) });
    const done = performance.now() - t0;
    const text = seen.map((p) => p.message).join('');
    const all = Array.from({ length: 20 }, (_, i) => `tick ${i}\n`).join('');
    // The server sends every chunk before the result, but SDK v1 hands a
    // notification to its handler a microtask later and forgets the
    // request's progress handler when the response is read: chunks that
    // arrive in the same read as the response (a client that fell behind,
    // under load) are dropped by the SDK. So: a prefix, in order, and most.
    assert.ok(all.startsWith(text), `lines in order, none twice or torn: ${JSON.stringify(text)}`);
    assert.ok(text.length >= all.length / 2, `most lines came live: ${JSON.stringify(text)}`);
    assert.ok(seen.length >= 10, `${seen.length} notifications`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress rises');
    assert.ok(seen[0].at < 800, `first chunk after ${seen[0].at.toFixed(0)} ms, not at the end (${done.toFixed(0)} ms)`);
    assert.ok(seen[seen.length - 1].at <= done);
    assert.equal(r.structuredContent.stdout, all, 'the result still has the whole output');
  });

  test('cancelling an infinite loop interrupts it; the same sandbox answers next, state intact', async () => {
    const ac = new AbortController();
    const call = run('while True:\n    pass', {}, { signal: ac.signal });
    await sleep(500);
    const t0 = performance.now();
    ac.abort('test cancels');
    await assert.rejects(call);
    assert.ok(performance.now() - t0 < 500);
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'x' });
    assert.equal(r.reason, 'exited', JSON.stringify(r).slice(0, 1000));
    assert.equal(r.result?.['text/plain'], '41', `KeyboardInterrupt stopped the loop; variables survived: ${JSON.stringify(r).slice(0, 1000)}`);
    assert.equal(r.kernel.state_lost, false);
  });

  test('a timeout interrupts; code that ignores the interrupt for 2 s costs the kernel, and the result says so', async () => {
    const soft = await sc.call('execute_code', { sandbox_id: id, code: 'import time\ntime.sleep(30)', timeout_s: 1 });
    assert.equal(soft.isError, true);
    assert.equal(soft.sc.reason, 'timeout');
    assert.equal(soft.sc.error.name, 'KeyboardInterrupt');
    assert.equal(soft.sc.kernel.state_lost, false);
    assert.match(soft.sc.hint, /interrupted/);
    const t0 = performance.now();
    const hard = await sc.call('execute_code', {
      sandbox_id: id, timeout_s: 1,
      code: 'import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass',
    });
    const ms = performance.now() - t0;
    assert.equal(hard.isError, true);
    assert.equal(hard.sc.reason, 'timeout');
    assert.equal(hard.sc.kernel.restarted, true);
    assert.equal(hard.sc.kernel.state_lost, true);
    assert.match(hard.sc.hint, /killed and restarted/);
    assert.ok(ms > 2800 && ms < 6000, `took ${ms.toFixed(0)} ms (1 s timeout + 2 s grace)`);
    const next = await sc.ok('execute_code', { sandbox_id: id, code: '"x" in globals()' });
    assert.equal(next.result['text/plain'], 'False');
    assert.equal(next.kernel.fresh, true);
  });

  test('a segfaulting kernel (ctypes.string_at(0)) is reported and replaced', async () => {
    await sc.ok('execute_code', { sandbox_id: id, code: 'y = 7' });
    const r = await sc.call('execute_code', { sandbox_id: id, code: 'import ctypes\nctypes.string_at(0)' });
    assert.equal(r.isError, true);
    assert.equal(r.sc.reason, 'kernel_died');
    assert.equal(r.sc.kernel.death, 'SIGSEGV');
    assert.equal(r.sc.kernel.state_lost, true);
    assert.match(r.sc.hint, /SIGSEGV.*state was lost/);
    const next = await sc.ok('execute_code', { sandbox_id: id, code: 'print("alive"); "y" in globals()' });
    assert.equal(next.stdout, 'alive\n');
    assert.equal(next.result['text/plain'], 'False');
    assert.equal(next.execution_count, 1);
  });

  test('restart_kernel clears state; fresh: true runs a separate process', async () => {
    await sc.ok('execute_code', { sandbox_id: id, code: 'z = 1' });
    const fresh = await sc.ok('execute_code', { sandbox_id: id, code: 'print("z" in globals())', fresh: true });
    assert.equal(fresh.mode, 'process');
    assert.equal(fresh.stdout, 'False\n');
    const rk = await sc.ok('restart_kernel', { sandbox_id: id });
    assert.equal(rk.restarted, true);
    const r = await sc.ok('execute_code', { sandbox_id: id, code: '"z" in globals()' });
    assert.equal(r.result['text/plain'], 'False');
    const bad = await sc.err('restart_kernel', { sandbox_id: (await sc.create({ language: 'bash' })).sandbox_id });
    assert.match(bad.text, /no kernel/);
  });
});

describe('kernels: JavaScript (SDK v1)', () => {
  let sc;
  let id;
  before(async () => {
    sc = await connectSandcastle({ timeoutMs: 60000 });
    id = (await sc.create({ language: 'javascript' })).sandbox_id;
  });
  after(async () => { await sc?.close(); });

  test('the JavaScript kernel keeps state and awaits a promise at top level', async () => {
    const a = await sc.ok('execute_code', { sandbox_id: id, code: 'let count = 1;\nconst add = (n) => { count += n; return count; };\nfunction twice(v) { return v * 2 }' });
    assert.equal(a.mode, 'kernel');
    const b = await sc.ok('execute_code', { sandbox_id: id, code: 'const fromPromise = await new Promise((r) => setTimeout(() => r(20), 50));\nconsole.log("waited");\nadd(fromPromise)' });
    assert.equal(b.stdout, 'waited\n');
    assert.equal(b.result['text/plain'], '21');
    const c = await sc.ok('execute_code', { sandbox_id: id, code: 'twice(count) + fromPromise' });
    assert.equal(c.result['text/plain'], '62', 'declarations made next to an await persist too');
  });

  test('a JavaScript error comes back as error {name, value, traceback}', async () => {
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'null.x' });
    assert.equal(r.error.name, 'TypeError');
    assert.match(r.error.traceback.join(''), /<cell-\d+>/);
    assert.equal((await sc.ok('execute_code', { sandbox_id: id, code: 'count' })).result['text/plain'], '21');
  });

  test('an awaiting cell is interrupted on timeout and the state survives', async () => {
    const r = await sc.call('execute_code', { sandbox_id: id, code: 'await new Promise(() => {})', timeout_s: 1 });
    assert.equal(r.sc.reason, 'timeout');
    assert.equal(r.sc.kernel.state_lost, false);
    assert.equal((await sc.ok('execute_code', { sandbox_id: id, code: 'count' })).result['text/plain'], '21');
  });

  test('a synchronous loop is stopped by SIGINT on cancel: Interrupted, the state survives', async () => {
    const ac = new AbortController();
    const call = sc.call('execute_code', { sandbox_id: id, code: 'for (;;) {}' }, { signal: ac.signal });
    await sleep(300);
    ac.abort('test cancels');
    await assert.rejects(call);
    const t0 = performance.now();
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'count' });
    assert.ok(performance.now() - t0 < 1500, 'not the 2-second kill');
    assert.equal(r.result?.['text/plain'], '21', JSON.stringify(r).slice(0, 800));
    assert.equal(r.kernel.state_lost, false);
    assert.equal(r.kernel.fresh, false, 'the same kernel answers');
  });
});
