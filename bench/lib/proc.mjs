// What a server process has running, read from /proc; starting one on
// loopback for a benchmark.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Child pids of `pid`, over all its threads.
function kids(pid) {
  const out = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const c = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
    if (c) out.push(...c.split(/\s+/));
  }
  return out;
}

// Live sandbox inits (warm pool + live sandboxes) of the server `pid`: the
// children of its zygote, which clones every init. -1 when /proc changed
// under the count (a process ended while it was read).
export function sandboxInits(pid) {
  try {
    let n = 0;
    for (const k of kids(pid)) {
      const cmd = readFileSync(`/proc/${k}/cmdline`, 'utf8');
      if (cmd.startsWith('sandcastle-zygote')) n += kids(k).length;
      else if (cmd.startsWith('sandcastle-init')) n += 1;
    }
    return n;
  } catch {
    return -1;
  }
}

// CPU seconds (user + system) of a process and its threads.
export function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime, stime in clock ticks (USER_HZ = 100)
}

// sandcastle over HTTP on a free loopback port with a state directory of its
// own (removed by stop()), and `args` after the usual ones.
export async function startHttpServer(bin, args = []) {
  const state = mkdtempSync(join(tmpdir(), 'sandcastle-bench-'));
  const proc = spawn(bin, ['--transport', 'http', '--host', '127.0.0.1', '--port', '0', '--state-dir', state,
    '--log-level', 'warn', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const base = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`no listening line:\n${err}`)), 15000);
    proc.stderr.on('data', (c) => {
      err += c;
      const m = err.match(/listening on (http:\/\/[^\s/]+)\/mcp/);
      if (m) { clearTimeout(t); res(m[1]); }
    });
  });
  return { base, pid: proc.pid, stop: () => { proc.kill('SIGTERM'); rmSync(state, { recursive: true, force: true }); } };
}
