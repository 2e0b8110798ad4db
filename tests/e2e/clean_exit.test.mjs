// A clean exit leaves nothing behind (issue 13). A server that ran sandboxes
// with kernels, and closed one (its emptied cgroup is kept for reuse), is
// ended cleanly — stdin EOF on stdio, SIGTERM on HTTP — as root and as an
// ordinary user. Afterwards its runtime directory (/run or /tmp
// sandcastle-<pid>, with share/) is gone, no cgroup named sandcastle-<pid>-*
// remains under any of its hierarchies, no process that descended from it
// (zygote, inits, kernels) is alive, and no mount of its runtime directory is
// left in the host's mount table.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BIN, REPO_ROOT } from './lib/harness.mjs';
import { cgroupParents, descendants, ownCgroups, runMounts, survivors } from './lib/leftovers.mjs';
import { openSession, post } from './lib/http.mjs';

const IS_ROOT = process.getuid() === 0;
const TEST_USER = 'sandcastle-test';
const CALL_MS = 90000;

// The unprivileged identity: the same user scripts/as-test-user runs the
// integration suite as (created on first use).
function testUser() {
  execFileSync(resolve(REPO_ROOT, 'scripts/as-test-user'), ['true']);
  const id = (flag) => Number(execFileSync('id', [flag, TEST_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g'), home: `/home/${TEST_USER}` };
}

// A stdio server driven line by line.
function stdioDriver(proc) {
  let buf = '';
  const waiting = new Map();
  proc.stdout.on('data', (c) => {
    buf += c.toString('utf8');
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg;
      try { msg = JSON.parse(line); } catch { continue; }
      if (msg && 'id' in msg && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
    }
  });
  let next = 1;
  return {
    async rpc(method, params) {
      const id = next++;
      const reply = new Promise((res) => waiting.set(id, res));
      proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
      return reply;
    },
    notify(method) { proc.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method })}\n`); },
  };
}

async function httpDriver(url) {
  const { headers } = await openSession(url);
  let next = 2;
  return {
    async rpc(method, params) {
      const id = next++;
      const r = await post(url, { jsonrpc: '2.0', id, method, params }, headers);
      assert.equal(r.status, 200, r.text);
      return Array.isArray(r.body) ? r.body.map((e) => e.json).find((m) => m?.id === id) : r.body;
    },
  };
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}

async function start(transport, user, stateDir) {
  const args = ['--state-dir', stateDir, '--log-level', 'info', '--pool-size', '1'];
  if (transport === 'http') args.push('--transport', 'http', '--host', '127.0.0.1', '--port', '0');
  const env = { PATH: process.env.PATH, HOME: user ? user.home : process.env.HOME };
  const proc = spawn(BIN, args, {
    stdio: ['pipe', 'pipe', 'pipe'], env, ...(user ? { uid: user.uid, gid: user.gid } : {}),
  });
  let stderr = '';
  proc.stderr.on('data', (c) => { stderr += c.toString('utf8'); });
  proc.stdin.on('error', () => {});
  const exited = new Promise((res) => proc.on('exit', (code, signal) => res({ code, signal })));
  let driver;
  if (transport === 'http') {
    const base = await withTimeout(new Promise((res, rej) => {
      proc.stderr.on('data', () => {
        const m = stderr.match(/listening on (http:\/\/[^\s/]+)\/mcp/);
        if (m) res(m[1]);
      });
      exited.then(({ code }) => rej(new Error(`server exited ${code}:\n${stderr}`)));
    }), 20000, 'listening line');
    driver = await httpDriver(`${base}/mcp`);
  } else {
    driver = stdioDriver(proc);
    const init = await withTimeout(driver.rpc('initialize', {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'clean-exit', version: '1' },
    }), 20000, 'initialize');
    assert.ok(init.result, JSON.stringify(init));
    driver.notify('notifications/initialized');
  }
  const call = async (name, args) => {
    const r = await withTimeout(driver.rpc('tools/call', { name, arguments: args }), CALL_MS, name);
    assert.ok(r?.result && !r.result.isError, `${name}: ${JSON.stringify(r).slice(0, 800)}\n${stderr.slice(-2000)}`);
    return r.result.structuredContent;
  };
  return { proc, exited, call, stderr: () => stderr };
}

async function scenario(transport, user) {
  const stateDir = mkdtempSync(join(tmpdir(), 'sandcastle-clean-exit-'));
  if (user) chownSync(stateDir, user.uid, user.gid);
  try {
    const srv = await start(transport, user, stateDir);
    const pid = srv.proc.pid;
    const runDir = `${user || !IS_ROOT ? '/tmp' : '/run'}/sandcastle-${pid}`;
    const parents = cgroupParents(pid);

    // Two sandboxes with warm kernels (Python, JavaScript), and a third
    // closed, so the reaper holds its emptied cgroup as a spare.
    const py = (await srv.call('create_sandbox', { language: 'python' })).sandbox_id;
    const js = (await srv.call('create_sandbox', { language: 'javascript' })).sandbox_id;
    const gone = (await srv.call('create_sandbox', {})).sandbox_id;
    assert.equal((await srv.call('execute_code', { sandbox_id: py, code: 'x = 6 * 7\nx' })).mode, 'kernel');
    assert.equal((await srv.call('execute_code', { sandbox_id: js, code: 'let y = 6 * 7; y' })).mode, 'kernel');
    await srv.call('execute_code', { sandbox_id: gone, code: 'print(1)' });
    await srv.call('close_sandbox', { sandbox_id: gone });

    const procs = descendants(pid);
    const comms = procs.map((p) => p.comm);
    assert.ok(comms.some((c) => c.includes('zygote')), `zygote among ${comms}`);
    assert.ok(comms.filter((c) => c.startsWith('sandcastle-ini')).length >= 2, `inits among ${comms}`);
    assert.ok(comms.some((c) => c.startsWith('python')) && comms.includes('node'), `kernels among ${comms}`);
    assert.ok(existsSync(`${runDir}/share`), `${runDir}/share exists while the server runs`);
    if (IS_ROOT && !user) assert.ok(ownCgroups(parents, pid).length >= 2, 'sandbox cgroups exist while it runs');

    if (transport === 'http') srv.proc.kill('SIGTERM');
    else srv.proc.stdin.end();
    const { code, signal } = await withTimeout(srv.exited, 30000, 'exit');
    assert.equal(signal, null, `exited by itself, not by ${signal}`);
    assert.equal(code, 0, srv.stderr().slice(-2000));

    const left = {
      runtimeDir: existsSync(runDir) ? [runDir] : [],
      cgroups: ownCgroups(parents, pid),
      processes: survivors(procs),
      mounts: runMounts(runDir),
    };
    assert.deepEqual(left, { runtimeDir: [], cgroups: [], processes: [], mounts: [] }, 'left behind');
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}

describe('a clean exit leaves no runtime dir, cgroup, process or mount', () => {
  const users = IS_ROOT ? [['root', null], ['unprivileged', testUser()]] : [['unprivileged', null]];
  for (const [who, user] of users) {
    test(`stdio, stdin EOF, ${who}`, () => scenario('stdio', user));
    test(`HTTP, SIGTERM, ${who}`, () => scenario('http', user));
  }
});
