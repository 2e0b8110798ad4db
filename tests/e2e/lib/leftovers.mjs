// What a sandcastle server may leave behind, for the suites that check it
// leaves nothing (clean_exit, kill9_loop): its descendant processes, its
// cgroups (sandcastle-<pid>-*) and mounts of its runtime directory.
import { readdirSync, readFileSync } from 'node:fs';
import { procTable } from './harness.mjs';

export function descendants(root) {
  const table = procTable();
  const found = [];
  let frontier = [root];
  while (frontier.length) {
    const next = [];
    for (const [pid, p] of table) if (frontier.includes(p.ppid)) { found.push({ pid, ...p }); next.push(pid); }
    frontier = next;
  }
  return found;
}

// Those of `procs` still alive (same pid and start time; a zombie counts).
export function survivors(procs) {
  const table = procTable();
  return procs.filter((p) => table.get(p.pid)?.start === p.start)
    .map((p) => `${p.pid} ${p.comm} (${table.get(p.pid).state})`);
}

// Directories named sandcastle-<pid>-* in every cgroup hierarchy the server
// belonged to (v1: one per controller; v2 and the hybrid "unified" tree).
export function cgroupParents(pid) {
  const parents = new Set();
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [, ctrls, path] = line.split(/:(.*?):/);
    if (ctrls === '') {
      parents.add(`/sys/fs/cgroup${path}`);
      parents.add(`/sys/fs/cgroup/unified${path}`);
    }
    for (const c of ctrls.split(',').filter((c) => c && !c.startsWith('name='))) parents.add(`/sys/fs/cgroup/${c}${path}`);
  }
  return [...parents];
}

export function ownCgroups(parents, pid) {
  const found = [];
  for (const dir of parents) {
    let names = [];
    try { names = readdirSync(dir); } catch { continue; }
    for (const n of names) if (n.startsWith(`sandcastle-${pid}-`)) found.push(`${dir.replace(/\/$/, '')}/${n}`);
  }
  return found;
}

export function runMounts(runDir) {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(runDir));
}

