// The kill -9 proof for durable sandboxes (issue 16): 50 rounds of start,
// work on persistent sandboxes (files written, commands run, code run, a
// package installed from a local index every tenth round), kill -9 of the
// server at a random moment while calls are in flight, restart. After every
// restart each write whose call had completed before the kill is there; at
// the end no process, cgroup, runtime directory or mount of any killed
// server is left, and the state database passes PRAGMA integrity_check.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { E2E_DIR } from './lib/harness.mjs';
import { cgroupParents, descendants, ownCgroups, runMounts, survivors } from './lib/leftovers.mjs';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';

const ROUNDS = Number(process.env.KILL9_ROUNDS ?? 50);
const IN_FLIGHT = 6;

function startIndex() {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

describe(`kill -9 loop: ${ROUNDS} rounds`, () => {
  let state, index;
  before(async () => {
    state = tempDir('sandcastle-kill9-');
    index = await startIndex();
  });
  after(() => {
    index?.child.kill();
    state?.cleanup();
  });

  test('every completed write survives, nothing is left behind, the database is intact', async (t) => {
    const start = () => connectSandcastle({
      args: ['--state-dir', state.dir, '--pip-index-url', `http://127.0.0.1:${index.port}/simple/`],
      timeoutMs: 120000,
    });
    const killed = [];  // {pid, procs, parents, runDir}
    const completed = [];  // {name, content} written by calls that answered before their server died
    const logged = [];  // lines appended by commands that answered
    let installed = false;
    // A deterministic sequence of "random" kill delays, so a failure replays.
    let seed = 16;
    const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };

    for (let round = 0; round < ROUNDS; round++) {
      const sc = await start();
      try {
        if (round === 0) {
          await sc.create({ language: 'python', name: 'py', persistent: true });
          await sc.create({ language: 'bash', name: 'sh', persistent: true });
        }
        // What the last round completed is all here.
        const expect = completed.filter((c) => c.round === round - 1);
        if (expect.length) {
          const r = await sc.ok('execute_command', { sandbox_id: 'sh', command: `cat ${expect.map((c) => c.name).join(' ')}` });
          assert.equal(r.stdout, expect.map((c) => c.content).join(''), `round ${round}: completed writes of round ${round - 1}`);
        }
        if (logged.length) {
          const r = await sc.ok('execute_command', { sandbox_id: 'sh', command: 'cat log.txt' });
          const lines = new Set(r.stdout.split('\n'));
          for (const l of logged) assert.ok(lines.has(l), `round ${round}: log line ${l} of a completed command`);
        }
        if (round % 10 === 0) {
          const inst = await sc.ok('install_packages', { sandbox_id: 'py', packages: ['sandcastle_demo==1.2.3'] });
          assert.equal(inst.status, 'success', JSON.stringify(inst));
          installed = true;
        }
        if (installed) {
          const r = await sc.ok('execute_code', { sandbox_id: 'py', code: 'import sandcastle_demo as d\nprint(d.VERSION)' });
          assert.equal(r.stdout, '1.2.3\n');
        }

        // Calls in flight, then the kill at a random moment among them.
        const pid = sc.transport._process.pid;
        const flight = [];
        for (let i = 0; i < IN_FLIGHT; i++) {
          const name = `r${round}-${i}.txt`;
          const content = `round ${round} file ${i}\n`;
          flight.push(sc.call('write_file', { sandbox_id: 'sh', path: name, content })
            .then((r) => { if (!r.isError) completed.push({ round, name, content }); }, () => {}));
          const line = `r${round}-c${i}`;
          flight.push(sc.call('execute_command', { sandbox_id: 'sh', command: `echo ${line} >> log.txt` })
            .then((r) => { if (!r.isError && r.sc?.exit_code === 0) logged.push(line); }, () => {}));
          flight.push(sc.call('execute_code', { sandbox_id: 'py', code: `open('py-${round}-${i}.txt','w').write('x')` }).catch(() => {}));
        }
        await new Promise((r) => setTimeout(r, Math.floor(rand() * 25)));
        const procs = descendants(pid);
        const parents = cgroupParents(pid);
        const exited = new Promise((r) => sc.transport._process.once('exit', r));
        process.kill(pid, 'SIGKILL');
        await exited;
        await Promise.allSettled(flight);
        killed.push({ pid, procs, parents, runDir: `/run/sandcastle-${pid}` });
      } finally {
        await sc.close().catch(() => {});
      }
    }

    // A last clean run: the last round's writes, then a clean exit.
    const sc = await start();
    const last = completed.filter((c) => c.round === ROUNDS - 1);
    if (last.length) {
      const r = await sc.ok('execute_command', { sandbox_id: 'sh', command: `cat ${last.map((c) => c.name).join(' ')}` });
      assert.equal(r.stdout, last.map((c) => c.content).join(''));
    }
    const count = await sc.ok('execute_command', { sandbox_id: 'sh', command: 'ls r*-*.txt | wc -l' });
    // At least the completed ones: a write can land and its server die
    // before the answer leaves.
    assert.ok(Number(count.stdout.trim()) >= new Set(completed.map((c) => c.name)).size, count.stdout);
    const exitedClean = new Promise((r) => sc.transport._process.once('exit', (code) => r(code)));
    await sc.close();
    assert.equal(await exitedClean, 0);

    // A killed server's children go to the host's pid 1, which reaps the
    // dead among them in its own time: zombies get a few seconds for that;
    // anything still running is left behind at once.
    const alive = () => killed.flatMap((k) => survivors(k.procs));
    for (let i = 0; i < 100 && alive().some((p) => p.endsWith('(Z)')); i++) await new Promise((r) => setTimeout(r, 100));
    const left = { processes: alive(), cgroups: [], runtimeDirs: [], mounts: [] };
    for (const k of killed) {
      left.cgroups.push(...ownCgroups(k.parents, k.pid));
      if (existsSync(k.runDir)) left.runtimeDirs.push(k.runDir);
      left.mounts.push(...runMounts(k.runDir));
    }
    left.mounts.push(...readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(state.dir)));
    assert.deepEqual(left, { processes: [], cgroups: [], runtimeDirs: [], mounts: [] }, 'left behind by killed servers');
    const check = execFileSync('/usr/bin/python3', ['-c',
      'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])',
      join(state.dir, 'sandcastle.db')], { encoding: 'utf8' });
    assert.equal(check.trim(), 'ok');
    assert.ok(completed.length > ROUNDS, `enough writes completed to prove something (${completed.length})`);
    const attempted = ROUNDS * IN_FLIGHT;
    t.diagnostic(`${ROUNDS} kills; writes answered before the kill: ${completed.length} of ${attempted}, ` +
      `commands: ${logged.length} of ${attempted}; files on disk: ${count.stdout.trim()}`);
  });
});
