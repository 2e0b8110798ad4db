// Command-line options of the bench scripts. bench/run passes the same
// arguments to every benchmark, so an option that belongs to another bench
// script is accepted and ignored; anything else is an error.
import { resolve } from 'node:path';

// Every option any bench script takes, and whether it has a value.
const ALL = {
  sandcastle: true, loader: true, requests: true, streams: true, concurrency: true, iterations: true,
  warmup: true, rounds: true, count: true, oneshot: true, creates: true, concurrent: true, json: false,
  'baseline-bin': true, 'fork-exec': true, 'idle-s': true, big: true, 'big-mib': true, files: true, sizes: true, languages: true, unshare: false, mib: true,
};

// `types` maps each option of this script to 'int' (>= 1), 'int0' (>= 0),
// 'path', 'list' (comma-separated numbers), 'words' (a string) or 'flag'.
export function parseArgs(argv, { script, defaults, types }) {
  const opts = { ...defaults };
  const usage = `usage: ${script} ${Object.entries(types).map(([k, t]) => (t === 'flag' ? `[--${k}]`
    : `[--${k} ${t === 'path' ? 'PATH' : t === 'list' ? 'N,N,...' : 'N'}]`)).join(' ')}`;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(usage);
      process.exit(0);
    }
    const key = a.startsWith('--') ? a.slice(2) : '';
    if (!(key in ALL)) throw new Error(`unknown argument ${a}\n${usage}`);
    if (!ALL[key]) {
      if (types[key] === 'flag') opts[key] = true;
      continue;
    }
    if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
    const v = argv[++i];
    const type = types[key];
    if (!type) continue;  // another bench script's option
    if (type === 'path') opts[key] = resolve(v);
    else if (type === 'words') opts[key] = v;
    else if (type === 'list') opts[key] = v.split(',').map(Number);
    else {
      const n = Number(v);
      const min = type === 'int0' ? 0 : 1;
      if (!Number.isInteger(n) || n < min) throw new Error(`${a} must be an integer >= ${min}`);
      opts[key] = n;
    }
  }
  return opts;
}
