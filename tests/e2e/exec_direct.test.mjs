// execute_command runs a simple command (one program and its arguments, no
// shell syntax) without starting bash, with the environment bash would have
// given it; everything else, and every program that cannot be executed,
// still goes through bash. Driven by the official SDK client over stdio.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connectSandcastle } from './lib/sandbox_client.mjs';

describe('execute_command without bash for simple commands', () => {
  let sc;
  let id;
  const run = async (command, extra = {}) => (await sc.call('execute_command', { sandbox_id: id, command, ...extra })).sc;
  before(async () => {
    sc = await connectSandcastle({ timeoutMs: 60000 });
    id = (await sc.create({ language: 'bash' })).sandbox_id;
  });
  after(async () => { await sc?.close(); });

  test('a simple command sees the environment bash would give it', async () => {
    const direct = await run('env');
    const viaBash = await run('env ;');  // shell syntax: bash runs it
    assert.equal(direct.exit_code, 0);
    const lines = (s) => s.stdout.trimEnd().split('\n');
    assert.deepEqual(lines(direct).sort(), lines(viaBash).sort());
    for (const v of ['PWD=/workspace', 'SHLVL=0', '_=/usr/bin/env']) assert.ok(lines(direct).includes(v), v);
    // Bash lists its environment in its own order; the direct exec appends
    // what bash would add after the request's variables: proof it ran.
    assert.deepEqual(lines(direct).slice(-3), ['PWD=/workspace', 'SHLVL=0', '_=/usr/bin/env']);
    assert.notDeepEqual(lines(viaBash).slice(-3), lines(direct).slice(-3));
  });

  test('workdir gives PWD, and arguments pass through unchanged', async () => {
    await run('mkdir -p /workspace/sub');
    const r = await run('printenv PWD', { workdir: 'sub' });
    assert.equal(r.stdout, '/workspace/sub\n');
    const a = await run('/usr/bin/printf %s: a=1 --x=y,z 50%');
    assert.equal(a.stdout, 'a=1:--x=y,z:50%:');
  });

  test('stdin, the timeout and the output cap reach a directly executed program', async () => {
    const cat = await run('cat', { stdin: 'from stdin\n' });
    assert.equal(cat.stdout, 'from stdin\n');
    const slow = (await sc.call('execute_command', { sandbox_id: id, command: 'sleep 30', timeout_s: 1 }));
    assert.equal(slow.isError, true);
    assert.equal(slow.sc.reason, 'timeout');
    const big = await run('head -c 3000000 /dev/zero');
    assert.equal(big.truncated, true);
    assert.equal(big.stdout_bytes, 3000000);
    assert.ok(big.stdout.length < 1.1 * (1 << 20), `stdout kept ${big.stdout.length} of 3000000 bytes (head and tail of 1 MiB)`);
  });

  test('a program that is not found gets bash\'s message and status 127', async () => {
    const r = await run('no-such-program-e2e --flag');
    assert.equal(r.exit_code, 127);
    assert.equal(r.stderr, '/bin/bash: line 1: no-such-program-e2e: command not found\n');
  });

  test('a script without #! still runs as bash would run it, and a non-executable file gets 126', async () => {
    await sc.ok('write_file', { sandbox_id: id, path: 'noshebang', content: 'echo from-script $((2+3))\n' });
    await run('chmod +x noshebang');
    const r = await run('./noshebang');
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, 'from-script 5\n');
    await sc.ok('write_file', { sandbox_id: id, path: 'plain', content: 'x\n' });
    const d = await run('./plain');
    assert.equal(d.exit_code, 126);
    assert.match(d.stderr, /^\/bin\/bash: line 1: \.\/plain: Permission denied\n$/);
  });

  test('builtins, true and an env that steers bash keep bash', async () => {
    assert.equal((await run('echo -n hi')).stdout, 'hi');
    assert.equal((await run('true')).exit_code, 0);
    assert.equal((await run('false')).exit_code, 1);
    const r = await run('env', { env: { SHLVL: '5' } });
    assert.ok(r.stdout.split('\n').includes('SHLVL=5'), 'bash adjusts an inherited SHLVL itself');
  });
});
