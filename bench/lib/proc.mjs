// What a server process has running, read from /proc.
import { readdirSync, readFileSync } from 'node:fs';

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
