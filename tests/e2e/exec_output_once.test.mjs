// Large output appears once in a tool result: whole in structuredContent, and
// only its head and tail in the text block (which says how much it left out
// and where the rest is). Small output stays whole in both, as clients expect:
// the text block is the JSON of the structured result. Driven by the official
// SDK v1 client; the wire is read from its transport.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { exchange } from './lib/tap.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const count = (hay, needle) => hay.split(needle).length - 1;

// The tools/call response on the wire for the last call made.
function lastResponse(sc) {
  const calls = sc.wire.out.filter((m) => m.method === 'tools/call');
  const req = calls[calls.length - 1];
  return sc.wire.in.find((m) => m.id === req.id && 'result' in m);
}

describe('large output appears once', () => {
  let sc;
  before(async () => { sc = await connectSandcastle({ timeoutMs: 60000 }); });
  after(async () => { await sc?.close(); });

  // 300 KB before and after a marker that must cross the wire exactly once.
  const big = "print('a' * 300000)\nprint('MIDDLE-MARKER-7f3a')\nprint('b' * 300000)\n";

  const checkOnce = (r, wire) => {
    const raw = JSON.stringify(wire);
    assert.equal(count(raw, 'MIDDLE-MARKER-7f3a'), 1, 'the middle of the output is sent once');
    assert.ok(raw.length < 600021 + 24 * 1024, `response ${raw.length} bytes for 600 KB of output`);
    assert.equal(r.sc.stdout.length, 600021);
    assert.ok(r.sc.stdout.includes('MIDDLE-MARKER-7f3a'), 'structuredContent has all of it');
    const text = JSON.parse(r.raw.content[0].text);
    assert.ok(text.stdout.startsWith('a'.repeat(4000)) && text.stdout.endsWith('b'.repeat(4000) + '\n'), 'head and tail in the text');
    assert.match(text.stdout, /\n\[… \d+ bytes of stdout not repeated here …\]\n/);
    assert.match(text.text_excerpt, /^this text shows the head and tail of large output \(stdout: \d+ of 600021 bytes left out\); the whole output is in the result's structuredContent/);
    assert.equal(text.exit_code, r.sc.exit_code);
  };

  test('execute_code one-shot: once, head and tail in the text', async () => {
    const r = await sc.call('execute_code', { language: 'python', code: big });
    assert.equal(r.isError, false);
    checkOnce(r, lastResponse(sc));
  });

  test('execute_code in a kernel and execute_command: once', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    const k = await sc.call('execute_code', { sandbox_id, code: big });
    assert.equal(k.sc.mode, 'kernel');
    checkOnce(k, lastResponse(sc));
    const c = await sc.call('execute_command', { sandbox_id, command: `/usr/bin/python3 -c "${big.trim().replaceAll('\n', '; ')}"` });
    assert.equal(c.sc.exit_code, 0, JSON.stringify(c.sc).slice(0, 400));
    checkOnce(c, lastResponse(sc));
  });

  test('small output: whole in both, the text is the structured result', async () => {
    const r = await sc.sdkCall('execute_code', { language: 'python', code: 'import sys\nprint("hi")\nprint("oops", file=sys.stderr)' });
    assert.equal(r.isError, false);
    assert.equal(r.sc.stdout, 'hi\n');
    assert.deepEqual(JSON.parse(r.raw.content[0].text), r.sc);
  });

  test('output just over the limit: the SDK client still validates and reads it', async () => {
    const r = await sc.sdkCall('execute_code', { language: 'python', code: "print('x' * 20000)" });
    assert.equal(r.isError, false);
    assert.equal(r.sc.stdout, 'x'.repeat(20000) + '\n');
    const text = JSON.parse(r.raw.content[0].text);
    assert.match(text.stdout, /^x{4096}\n\[… 11809 bytes of stdout not repeated here …\]\nx{4095}\n$/);
  });
});
