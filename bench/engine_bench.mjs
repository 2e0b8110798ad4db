#!/usr/bin/env node
// The engine backend's benchmark (issue 17), per engine (podman, then
// docker), each started by scripts/with-engine on a fresh socket and storage,
// all in one run and interleaved:
//   (1) create+run+close: `create_sandbox` (python) + `execute_code print(1)`
//       in it + `close_sandbox`, back to back, through
//       `sandcastle --backend engine --pool-size 2` over stdio, against the
//       engine's CLI running the same container shape once:
//       `podman|docker run --rm ... sandcastle/host-base:2 python3 -c 'print(1)'`
//       (target <= 0.3x). The CLI's flags are read from a warm container of
//       the server's (GET /containers/{id}/json): the same binds (/usr, the
//       generated /etc, /etc/ssl..., the shared dir), tmpfs mounts, user,
//       memory/pids/CPU limits and ulimits, plus --network none, --cap-drop
//       ALL, no-new-privileges and --read-only. Before each timed sandcastle
//       cycle and each CLI run the bench waits until the pool is full again
//       (the engine lists 2 running sandcastle containers, each with its
//       agent exec) and then 100 ms more, so neither side runs beside the
//       pool's refill or a container's removal.
//       Informational rows split the cycle per call, and a second cycle
//       creates a bash sandbox and runs `execute_command python3 -c
//       'print(1)'`: a fresh python sandbox's first execute_code waits for
//       its kernel, which create_sandbox starts in the background; a bash
//       sandbox has none.
//   (2) exec true: `execute_command true` in a kept sandbox against
//       `podman|docker exec <ctr> true` in a running container of the same
//       shape (the CLI's, started with `run -d ... sleep infinity`)
//       (target <= 0.3x), and, informational, `execute_command true` on the
//       native backend (a second server) in the same rotation, so the
//       agent's relay cost shows.
// Also informational: 10 cycles back to back without waiting for the pool.
// Medians and p90 over the iterations; the load average is printed.
// Root only (the engines run rootful, as scripts/with-engine starts them).
//
// Usage: node bench/engine_bench.mjs [--sandcastle build/sandcastle]
//          [--iterations 30] [--count 50] [--json]
import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { cpus, hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from './lib/args.mjs';
import { LineClient } from './lib/line_client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const IMAGE = 'sandcastle/host-base:2';
const POOL = 2;

// ---- statistics
const sorted = (xs) => [...xs].sort((a, b) => a - b);
function pct(xs, p) {
  const s = sorted(xs);
  if (!s.length) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}
const median = (xs) => pct(xs, 50);
const ms = (x) => (Number.isFinite(x) ? (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)) : 'n/a');
const ratio = (a, b) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : 'n/a');
const sleep = (t) => new Promise((r) => setTimeout(r, t));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const stat = (xs) => ({ p50: median(xs), p90: pct(xs, 90), n: xs.length });

function which(cmd) {
  return (process.env.PATH || '').split(':').some((d) => d && existsSync(join(d, cmd)));
}

// A command's wall time; throws unless it exits 0 (and prints `expect`).
function timed(argv, expect) {
  return new Promise((res, rej) => {
    const t0 = performance.now();
    const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { if (err.length < 4000) err += d; });
    p.on('error', rej);
    p.on('close', (code) => {
      const t = performance.now() - t0;
      if (code !== 0 || (expect !== undefined && out !== expect))
        rej(new Error(`${argv.slice(0, 4).join(' ')} ...: exit ${code}, out ${JSON.stringify(out.slice(0, 200))}, err ${err.slice(0, 600)}`));
      else res(t);
    });
  });
}

const run = (argv) => new Promise((res, rej) => execFile(argv[0], argv.slice(1), { maxBuffer: 16 << 20 },
  (e, out, err) => (e ? rej(new Error(`${argv.join(' ')}: ${e.message} ${err}`)) : res(out))));

// ---- the Engine API over its unix socket (only between timed calls)
function api(sock, path) {
  return new Promise((res, rej) => {
    const req = request({ socketPath: sock, path, method: 'GET', headers: { Host: 'docker' } }, (r) => {
      let body = '';
      r.setEncoding('utf8');
      r.on('data', (d) => { body += d; });
      r.on('end', () => (r.statusCode === 200 ? res(JSON.parse(body)) : rej(new Error(`GET ${path}: ${r.statusCode} ${body.slice(0, 300)}`))));
    });
    req.on('error', rej);
    req.end();
  });
}

// An engine of its own: scripts/with-engine around a command that prints the
// URL and waits for stdin's end (then with-engine stops the engine and
// removes its storage).
async function startEngine(kind) {
  const p = spawn(join(root, 'scripts', 'with-engine'), [kind, 'sh', '-c', 'printf "%s\\n" "$SANDCASTLE_ENGINE_URL"; exec cat >/dev/null'],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { if (err.length < 4000) err += d; });
  const exited = new Promise((r) => p.on('exit', r));
  const url = await new Promise((res, rej) => {
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) res(out.slice(0, nl));
    });
    p.on('exit', (code) => rej(new Error(`with-engine ${kind} exited ${code}: ${err}`)));
  });
  const sock = url.replace(/^unix:\/\//, '');
  const dir = dirname(sock);
  const cli = kind === 'podman'
    ? ['podman', '--root', join(dir, 'root'), '--runroot', join(dir, 'run'), '--tmpdir', join(dir, 'tmp'),
      '--runtime', 'runc', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file']
    : ['docker', '-H', url];
  const version = await api(sock, '/version');
  return {
    kind, url, sock, cli, version: `${version.Version ?? '?'} (API ${version.ApiVersion ?? '?'})`,
    async stop() { p.stdin.end(); await exited; },
  };
}

// The server's containers (label sandcastle=1) that are running and have an
// exec (the agent's serve): a warm or live sandbox with its agent connected.
async function readyContainers(engine) {
  const list = await api(engine.sock, `/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: ['sandcastle=1'] }))}`);
  const ready = [];
  for (const c of list) {
    try {
      const info = await api(engine.sock, `/containers/${c.Id}/json`);
      if (info.State?.Running && (info.ExecIDs?.length ?? 0) > 0) ready.push(info);
    } catch { /* removed meanwhile */ }
  }
  return { total: list.length, ready };
}

// Until exactly `n` sandcastle containers run, each with its agent: the pool
// full again and every closed sandbox's container gone. Then 100 ms of idle.
async function waitSettled(engine, n, timeoutMs = 120000) {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    const { total, ready } = await readyContainers(engine);
    if (total === n && ready.length === n) { await sleep(100); return performance.now() - t0; }
    await sleep(25);
  }
  throw new Error(`${engine.kind}: the server's containers did not settle at ${n} within ${timeoutMs} ms`);
}

// The CLI flags of the same container shape as a server's container.
function shapeFlags(engine, info) {
  const h = info.HostConfig ?? {};
  const f = ['--network', 'none', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--read-only'];
  f.push('--user', info.Config?.User || '1000:1000');
  if (info.Config?.WorkingDir) f.push('--workdir', info.Config.WorkingDir);
  for (const b of h.Binds ?? []) f.push('-v', b.replace(/,rprivate,rbind$/, ''));
  // Podman lists the tmpfs mounts --read-only adds (/run, /var/tmp) and
  // its defaults (rprivate, tmpcopyup): the same flags bring them back. Its
  // CLI takes no uid=/gid=: "U" chowns the mount to --user instead.
  for (const [path, opts] of Object.entries(h.Tmpfs ?? {})) {
    if (engine.kind === 'podman' && (path === '/run' || path === '/var/tmp')) continue;
    let o = (opts || '').split(',').filter((x) => x && x !== 'rprivate' && x !== 'tmpcopyup');
    if (engine.kind === 'podman' && o.some((x) => x.startsWith('uid='))) o = [...o.filter((x) => !/^(uid|gid)=/.test(x)), 'U'];
    f.push('--tmpfs', o.length ? `${path}:${o.join(',')}` : path);
  }
  if (h.Memory) f.push('--memory', String(h.Memory));
  if (h.MemorySwap) f.push('--memory-swap', String(h.MemorySwap));
  if (h.PidsLimit) f.push('--pids-limit', String(h.PidsLimit));
  if (h.NanoCpus) f.push('--cpus', String(h.NanoCpus / 1e9));
  const ulimits = h.Ulimits?.length ? h.Ulimits
    : [{ Name: 'nofile', Soft: 20000, Hard: 20000 }, { Name: 'nproc', Soft: 32768, Hard: 32768 }];
  // Podman names them RLIMIT_NOFILE; its CLI wants nofile.
  for (const u of ulimits) f.push('--ulimit', `${u.Name.replace(/^RLIMIT_/i, '').toLowerCase()}=${u.Soft}:${u.Hard}`);
  return f;
}

function checkPrint1(res, what) {
  if (res.isError || res.sc?.stdout !== '1\n' || res.sc?.exit_code !== 0)
    throw new Error(`${what}: unexpected result ${JSON.stringify(res.r).slice(0, 400)}`);
}

async function server(opts, args) {
  const state = mkdtempSync(join(tmpdir(), 'sc-engine-bench-'));
  const c = new LineClient(opts.sandcastle, ['--state-dir', state, '--log-level', 'warn', '--pool-size', String(POOL), ...args]);
  c.state = state;
  await c.initialize('engine-bench');
  const close = c.close.bind(c);
  c.close = async () => { await close(); rmSync(state, { recursive: true, force: true }); };
  return c;
}

// One create+run+close cycle; `run` is execute_code or execute_command.
async function cycle(c, viaCommand) {
  const t0 = performance.now();
  // A bash sandbox starts no kernel: nothing runs beside the command.
  const cr = await c.callOk('create_sandbox', { language: viaCommand ? 'bash' : 'python' });
  const id = cr.sc.sandbox_id;
  const ex = viaCommand
    ? await c.call('execute_command', { command: "python3 -c 'print(1)'", sandbox_id: id })
    : await c.call('execute_code', { code: 'print(1)', sandbox_id: id });
  checkPrint1(ex, viaCommand ? 'execute_command python3' : 'execute_code');
  const cl = await c.callOk('close_sandbox', { sandbox_id: id });
  return { total: performance.now() - t0, create: cr.t, exec: ex.t, dur: ex.sc.duration_ms, close: cl.t,
    freshKernel: ex.sc.kernel?.fresh === true };
}

async function benchEngine(opts, kind, native, nativeSb) {
  const engine = await startEngine(kind);
  const sc = await server(opts, ['--backend', 'engine', '--engine', engine.url]);
  let ctr = null;
  try {
    await waitSettled(engine, POOL);
    const { ready } = await readyContainers(engine);
    const shape = shapeFlags(engine, ready[0]);
    const runArgv = [...engine.cli, 'run', '--rm', ...shape, IMAGE, 'python3', '-c', 'print(1)'];
    // Warm-up: one of each (first CLI run, first kernel, image layers cached).
    await timed(runArgv, '1\n');
    await waitSettled(engine, POOL);
    await cycle(sc, false);
    await waitSettled(engine, POOL);

    // (1) create+run+close vs the CLI's run --rm; order alternates.
    const A = { total: [], create: [], exec: [], dur: [], close: [], noClose: [], cli: [], cmd: [], cmdExec: [], cmdDur: [], waits: [], fresh: 0 };
    for (let i = 0; i < opts.iterations; i++) {
      const steps = [
        async () => {
          const r = await cycle(sc, false);
          A.total.push(r.total); A.create.push(r.create); A.exec.push(r.exec); A.dur.push(r.dur); A.close.push(r.close);
          A.noClose.push(r.total - r.close);
          if (r.freshKernel) A.fresh++;
        },
        async () => { A.cli.push(await timed(runArgv, '1\n')); },
        async () => { const r = await cycle(sc, true); A.cmd.push(r.total); A.cmdExec.push(r.exec); A.cmdDur.push(r.dur); },
      ];
      const order = i % 2 ? [1, 0, 2] : [0, 1, 2];
      for (const s of order) {
        A.waits.push(await waitSettled(engine, POOL));
        await steps[s]();
      }
    }
    await waitSettled(engine, POOL);
    // Informational: cycles back to back with no wait, so the pool's refill
    // and the removals run beside them (a create that finds the pool empty
    // starts a container on the request path).
    const sustained = [];
    let cold = 0;
    for (let i = 0; i < 10; i++) {
      const r = await cycle(sc, false);
      sustained.push(r.total);
      if (r.create > 50) cold++;
    }
    await waitSettled(engine, POOL);

    // (2) exec true: a kept sandbox, a CLI container of the same shape, the native sandbox.
    const kept = await sc.callOk('create_sandbox', { language: 'python' });
    const keptId = kept.sc.sandbox_id;
    await waitSettled(engine, POOL + 1);
    const name = `sc-engine-bench-${process.pid}`;
    await run([...engine.cli, 'run', '-d', '--name', name, ...shape, IMAGE, 'sleep', 'infinity']);
    ctr = name;
    const execArgv = [...engine.cli, 'exec', name, 'true'];
    const B = { sc: [], scDur: [], cli: [], native: [], nativeDur: [] };
    const steps = [
      async () => {
        const r = await sc.callOk('execute_command', { command: 'true', sandbox_id: keptId });
        B.sc.push(r.t); B.scDur.push(r.sc.duration_ms);
      },
      async () => { B.cli.push(await timed(execArgv)); },
      async () => {
        const r = await native.callOk('execute_command', { command: 'true', sandbox_id: nativeSb });
        B.native.push(r.t); B.nativeDur.push(r.sc.duration_ms);
      },
    ];
    for (let w = 0; w < 3; w++) for (const s of steps) await s();
    for (const k of Object.keys(B)) B[k] = [];
    for (let i = 0; i < opts.count; i++)
      for (let j = 0; j < 3; j++) await steps[(i + j) % 3]();
    // The kernel: warm execute_code in the kept sandbox.
    const warmKernel = [];
    for (let i = 0; i < 10; i++) {
      const r = await sc.call('execute_code', { code: 'print(1)', sandbox_id: keptId });
      checkPrint1(r, 'warm kernel');
      warmKernel.push(r.t);
    }
    // A process, not the kernel, in the same kept sandbox: steady state of
    // what the bash cycle's first execute_command costs.
    const keptCmd = [];
    const keptCmdDur = [];
    for (let i = 0; i < 10; i++) {
      const r = await sc.call('execute_command', { command: "python3 -c 'print(1)'", sandbox_id: keptId });
      checkPrint1(r, 'kept execute_command python3');
      keptCmd.push(r.t);
      keptCmdDur.push(r.sc.duration_ms);
    }
    await sc.callOk('close_sandbox', { sandbox_id: keptId });
    const s = (xs) => stat(xs);
    return {
      engine: kind, version: engine.version,
      cycle: { total: s(A.total), create: s(A.create), exec: s(A.exec), execDur: s(A.dur), close: s(A.close), noClose: s(A.noClose),
        cli: s(A.cli), viaCommand: s(A.cmd), viaCommandExec: s(A.cmdExec), viaCommandDur: s(A.cmdDur), freshKernels: A.fresh,
        settleWait: s(A.waits), sustained: s(sustained), sustainedCold: cold },
      exec: { sc: s(B.sc), scDur: s(B.scDur), cli: s(B.cli), native: s(B.native), nativeDur: s(B.nativeDur) },
      warmKernel: s(warmKernel), keptCommand: s(keptCmd), keptCommandDur: s(keptCmdDur),
      cliShape: shape.join(' '),
    };
  } finally {
    if (ctr) await run([...engine.cli, 'rm', '-f', ctr]).catch(() => {});
    await sc.close();
    await engine.stop();
  }
}

function table(r) {
  const pass = (ok) => (ok ? 'met' : '**missed**');
  const c = r.cycle;
  const e = r.exec;
  const cli = r.engine;
  const row = (what, a, b, base, target) =>
    `| ${what} | ${ms(a.p50)} / ${ms(a.p90)} ms | ${b ? `${ms(b.p50)} / ${ms(b.p90)} ms${base ? ` (${base})` : ''}` : ''} | ${b ? ratio(a.p50, b.p50) : ''} | ${target ?? ''} |`;
  return [
    `### ${cli} ${r.version}`,
    '',
    '| benchmark (p50 / p90) | sandcastle --backend engine | engine CLI | ratio (p50) | target |',
    '|---|---:|---:|---:|---|',
    row(`(1) create_sandbox + execute_code print(1) + close_sandbox, ${c.total.n}×`, c.total, c.cli, `\`${cli} run --rm\` python3 -c`,
      `≤ 0.3× ${pass(c.total.p50 / c.cli.p50 <= 0.3)}`),
    row('(1) … create_sandbox (warm pool)', c.create, c.cli),
    row(`(1) … execute_code print(1) in the fresh sandbox (kernel started for it: ${c.freshKernels}/${c.total.n})`, c.exec, c.cli),
    row('(1) … of which the server\'s duration_ms', c.execDur, c.cli),
    row('(1) … close_sandbox (container removed)', c.close, c.cli),
    row('(1) … the cycle without close_sandbox (create + execute_code)', c.noClose, c.cli),
    row('(1) create_sandbox (bash: no kernel) + execute_command `python3 -c \'print(1)\'` + close', c.viaCommand, c.cli),
    row('(1) … of which execute_command (the sandbox\'s first exec)', c.viaCommandExec, c.cli),
    row('(1) … … of which the server\'s duration_ms', c.viaCommandDur, c.cli),
    row('(1) execute_command `python3 -c \'print(1)\'` in a kept sandbox (not its first)', r.keptCommand, c.cli),
    row('(1) … of which the server\'s duration_ms', r.keptCommandDur, c.cli),
    row('(1) warm-kernel execute_code print(1) in a kept sandbox', r.warmKernel, c.cli),
    row(`(1) the create+execute_code+close cycle, ${c.sustained.n}× back to back with no wait (creates > 50 ms, pool empty: ${c.sustainedCold})`, c.sustained, c.cli),
    row(`(2) execute_command \`true\` in a kept sandbox, ${e.sc.n}×`, e.sc, e.cli, `\`${cli} exec <ctr> true\``,
      `≤ 0.3× ${pass(e.sc.p50 / e.cli.p50 <= 0.3)}`),
    row('(2) … of which the server\'s duration_ms (the agent\'s exec, relay included)', e.scDur, e.cli),
    row('(2) native backend: execute_command `true` (same rotation)', e.native, e.cli),
    row('(2) … of which the server\'s duration_ms', e.nativeDur, e.cli),
    '',
    `Engine-minus-native for execute_command true (p50): ${ms(e.sc.p50 - e.native.p50)} ms. ` +
      `Wait for the pool to settle before each timed step: p50 ${ms(c.settleWait.p50)} ms (untimed).`,
    '',
  ].join('\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2), {
    script: 'engine_bench.mjs',
    defaults: { sandcastle: join(root, 'build', 'sandcastle'), iterations: 30, count: 50, json: false },
    types: { sandcastle: 'path', iterations: 'int', count: 'int', json: 'flag' },
  });
  if (process.getuid() !== 0) {
    console.log('engine_bench: skipped (needs root: scripts/with-engine starts rootful engines)');
    return;
  }
  if (!existsSync(opts.sandcastle)) throw new Error(`sandcastle not found at ${opts.sandcastle}; build it first`);
  const engines = [];
  if (which('podman')) engines.push('podman');
  if (which('dockerd') && which('docker')) engines.push('docker');
  if (!engines.length) {
    console.log('engine_bench: skipped (neither podman nor dockerd+docker installed)');
    return;
  }
  const load0 = loadavg();
  const native = await server(opts, []);
  const results = [];
  try {
    const sb = await native.callOk('create_sandbox', { language: 'python' });
    for (const kind of engines) results.push(await benchEngine(opts, kind, native, sb.sc.sandbox_id));
  } finally {
    await native.close();
  }
  const load1 = loadavg();
  if (opts.json) {
    console.log(JSON.stringify({ load_start: load0, load_end: load1, hostname: hostname(), results }, null, 2));
    return;
  }
  console.log(`Engine backend vs the engine's CLI, same container shape, interleaved; ${opts.iterations} cycles and ` +
    `${opts.count} exec rotations per engine; p50 / p90. Load average at the start ${load0}, at the end ${load1} ` +
    `(${cpus().length} CPUs).`);
  console.log('');
  for (const r of results) console.log(table(r));
  for (const r of results) console.log(`${r.engine} CLI shape: \`${r.engine} run ${r.cliShape} ${IMAGE} ...\`\n`);
}

main().catch((e) => {
  console.error(`engine_bench: ${e.stack ?? e}`);
  process.exit(1);
});
