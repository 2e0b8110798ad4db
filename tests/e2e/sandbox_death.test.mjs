// A sandbox whose processes die under the server (issue 16): kill -9 of the
// zygote (which takes every sandbox's init with it) or of one sandbox's
// init. A persistent sandbox answers its next call on its files, saying
// state_lost once; an ephemeral one's calls get a not-found error saying it
// ended unexpectedly and what to do; a call running when it died fails,
// saying so (it is never run twice); new sandboxes still start (a new
// zygote); and the server leaves nothing behind at exit. As root (the
// persistent disk is a loop-mounted image).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { connectSandcastle, tempDir } from './lib/sandbox_client.mjs';
import { cgroupParents, descendants, ownCgroups, runMounts, survivors } from './lib/leftovers.mjs';

const IS_ROOT = process.getuid() === 0;
const ENDED = /no longer exists: it ended unexpectedly: its processes were killed .*Call create_sandbox for a new one; create it with persistent: true/;

const serverPid = (sc) => sc.transport._process.pid;
const cmdline = (pid) => { try { return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'); } catch { return []; } };
const zygoteOf = (sc) => descendants(serverPid(sc)).filter((p) => cmdline(p.pid)[0] === 'sandcastle-zygote');
// Alive and not a zombie.
const running = (p) => { try { return !/\) Z /.test(readFileSync(`/proc/${p.pid}/stat`, 'utf8')); } catch { return false; } };

// Polls `cond` (a state change of other processes, which has no event to
// wait on from here) every 20 ms for up to `ms`.
async function until(cond, ms, what) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The host pid of a sandbox's init: the zygote's child whose root holds a
// file only that sandbox has (commands run in pid namespaces of their own,
// below init's, so a pid namespace does not name it).
async function initOf(sc, sandbox_id) {
  const marker = `.init-of-${sandbox_id}`;
  const dir = (await sc.ok('execute_command', { sandbox_id, command: `touch ${marker} && pwd` })).stdout.trim();
  const zygotes = zygoteOf(sc).map((z) => z.pid);
  const found = descendants(serverPid(sc))
    .filter((p) => zygotes.includes(p.ppid) && existsSync(`/proc/${p.pid}/root${dir}/${marker}`));
  assert.equal(found.length, 1, `one init for ${sandbox_id}: ${JSON.stringify(found)}`);
  return found[0];
}

describe('sandboxes whose processes died', { skip: !IS_ROOT && 'persistent sandboxes need root here' }, () => {
  let state, sc;
  const seen = new Map();  // every descendant ever seen: none may outlive the server
  const remember = () => { for (const p of descendants(serverPid(sc))) seen.set(`${p.pid}:${p.start}`, p); };
  before(async () => {
    state = tempDir('sandcastle-death-');
    sc = await connectSandcastle({ args: ['--state-dir', state.dir], timeoutMs: 120000 });
  });
  after(async () => {
    await sc?.close().catch(() => {});
    state?.cleanup();
  });

  test('kill -9 of the zygote: the persistent sandbox comes back on its files, the ephemeral one is gone, creates work', async () => {
    const keep = await sc.create({ language: 'python', name: 'keep', persistent: true });
    const temp = await sc.create({ language: 'python', name: 'temp' });
    await sc.ok('write_file', { sandbox_id: 'keep', path: 'notes.txt', content: 'kept on disk\n' });
    assert.equal((await sc.ok('execute_code', { sandbox_id: 'keep', code: 'x = 41\nprint(x)' })).stdout, '41\n');
    assert.equal((await sc.ok('execute_code', { sandbox_id: 'temp', code: 'y = 1\nprint(y)' })).stdout, '1\n');
    const inits = [await initOf(sc, 'keep'), await initOf(sc, 'temp')];
    const [zygote] = zygoteOf(sc);
    assert.ok(zygote, 'the server runs a zygote');
    remember();

    process.kill(zygote.pid, 'SIGKILL');
    await until(() => !inits.some(running), 10000, 'the sandboxes\' inits to die with the zygote');

    const run = await sc.ok('execute_code', {
      sandbox_id: 'keep', code: "print(open('notes.txt').read().strip(), 'x' in globals())",
    });
    assert.equal(run.stdout, 'kept on disk False\n', JSON.stringify(run));
    assert.equal(run.state_lost, true);
    assert.equal((await sc.ok('execute_code', { sandbox_id: 'keep', code: 'print(2)' })).state_lost, undefined, 'said once');

    const gone = await sc.err('execute_code', { sandbox_id: temp.sandbox_id, code: 'print(y)' });
    assert.match(gone.text, ENDED);
    assert.match(gone.text, new RegExp(`sandbox '${temp.sandbox_id}' no longer exists`));
    const listedIds = (await sc.ok('list_sandboxes')).sandboxes.map((s) => s.sandbox_id);
    assert.deepEqual(listedIds, [keep.sandbox_id]);

    const fresh = await sc.create({ language: 'python' });
    assert.equal((await sc.ok('execute_code', { sandbox_id: fresh.sandbox_id, code: 'print(3)' })).stdout, '3\n');
    const [next] = zygoteOf(sc);
    assert.ok(next && next.pid !== zygote.pid, 'a new zygote serves creates');
    await sc.ok('close_sandbox', { sandbox_id: fresh.sandbox_id });
    remember();
  });

  test('kill -9 of one sandbox\'s init: the same per sandbox; a call running then fails and says so', async () => {
    const temp = await sc.create({ language: 'bash' });
    await sc.ok('execute_command', { sandbox_id: 'keep', command: 'echo second > second.txt' });
    const keepInit = await initOf(sc, 'keep');
    const tempInit = await initOf(sc, temp.sandbox_id);
    remember();

    // Idle when killed: noticed at the next call, which runs on the new one.
    process.kill(tempInit.pid, 'SIGKILL');
    await until(() => !running(tempInit), 10000, 'the init to die');
    assert.match((await sc.err('execute_command', { sandbox_id: temp.sandbox_id, command: 'true' })).text, ENDED);

    // Busy when killed: the call fails, saying what happened; it is not run again.
    const call = sc.call('execute_command', { sandbox_id: 'keep', command: 'echo ran >> runs.txt; sleep 60' });
    await until(() => descendants(keepInit.pid).some((p) => p.comm === 'sleep'), 20000, 'the command to start');
    process.kill(keepInit.pid, 'SIGKILL');
    const failed = await call;
    assert.equal(failed.isError, true);
    assert.match(failed.text, /sandbox '.*' restarted during this call: its processes were killed .*run it again/);
    const after = await sc.ok('execute_command', { sandbox_id: 'keep', command: 'cat notes.txt second.txt runs.txt' });
    assert.equal(after.stdout, 'kept on disk\nsecond\nran\n');
    assert.equal(after.state_lost, true);
    remember();
  });

  test('nothing is left behind at exit', async () => {
    const pid = serverPid(sc);
    const parents = cgroupParents(pid);
    remember();
    const exited = new Promise((r) => sc.transport._process.once('exit', (code) => r(code)));
    await sc.close();
    sc = null;
    assert.equal(await exited, 0);
    const procs = [...seen.values()];
    // Orphans of the killed zygote are reaped by the host's pid 1 in its own time.
    await until(() => !survivors(procs).some((p) => p.endsWith('(Z)')), 10000, 'zombies to be reaped').catch(() => {});
    const runDir = `/run/sandcastle-${pid}`;
    assert.deepEqual({
      processes: survivors(procs),
      cgroups: ownCgroups(parents, pid),
      runtimeDir: existsSync(runDir) ? [runDir] : [],
      mounts: [...runMounts(runDir), ...readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(state.dir))],
    }, { processes: [], cgroups: [], runtimeDir: [], mounts: [] });
  });
});
