// A server ended at any moment of its start-up (while it is still preparing
// sandboxes) must let go of the client's pipes at once and leave no process
// behind. (A half-started sandbox child that inherited the server's stdio once
// made a client wait forever for EOF; that race is rare, so this checks the
// property over many random moments rather than reproducing it on demand.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { BIN, sleep } from './lib/harness.mjs';

const MARKER = ['--page-size', '4321'];  // finds this test's servers in ps

function leftovers() {
  try {
    return execFileSync('pgrep', ['-f', `${BIN} ${MARKER.join(' ')}`], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
  } catch {
    return [];  // pgrep exits 1 when nothing matches
  }
}

test('ended during start-up: stdout closes within 2.5 s and no process is left', async () => {
  for (let i = 0; i < 12; i++) {
    const child = spawn(BIN, MARKER, { stdio: ['pipe', 'pipe', 'ignore'] });
    const eof = new Promise((resolve) => child.stdout.on('end', resolve).resume());
    await sleep(Math.floor(Math.random() * 200));
    if (i % 2) child.stdin.end(); else child.kill('SIGTERM');
    const t0 = performance.now();
    const closed = await Promise.race([eof.then(() => true), sleep(2500).then(() => false)]);
    assert.ok(closed, `round ${i}: stdout still open after ${(performance.now() - t0).toFixed(0)} ms`);
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  }
  await sleep(200);
  assert.deepEqual(leftovers(), [], 'no server process survives');
});
