// install_packages / check_package_installation_status end to end: pip and npm
// run inside the sandbox and reach a local package index on 127.0.0.1 (built
// and served by fixtures/local_index.py) through sandcastle's egress proxy;
// nothing else is reachable, and code execution stays offline — even while an
// install runs, its proxy is out of reach of the sandbox's other programs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer as createHttpServer, request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { E2E_DIR, sleep } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

function startIndex() {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

// A host listener that must never be reached from inside a sandbox.
function startForbidden() {
  return new Promise((resolve) => {
    const hits = [];
    const srv = createServer((s) => { hits.push(Date.now()); s.end('reached'); });
    srv.listen(0, '127.0.0.1', () => resolve({ srv, port: srv.address().port, hits }));
  });
}

// pip's index, in front of the real one: passes requests through, or, once
// hold() is called, keeps the next request waiting until release() — so a
// test can act while an install is certainly under way.
function startGate(upstreamPort) {
  return new Promise((resolve) => {
    let held = null;
    const gate = {
      hold() {
        let reached, release;
        const reachedP = new Promise((r) => { reached = r; });
        const released = new Promise((r) => { release = r; });
        held = { reached, released };
        return { reached: reachedP, release };
      },
    };
    gate.srv = createHttpServer(async (req, res) => {
      if (held) {
        const h = held;
        held = null;
        h.reached();
        await h.released;
      }
      const up = httpRequest({ host: '127.0.0.1', port: upstreamPort, path: req.url, method: req.method },
        (ur) => { res.writeHead(ur.statusCode, ur.headers); ur.pipe(res); });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    gate.srv.listen(0, '127.0.0.1', () => { gate.port = gate.srv.address().port; resolve(gate); });
  });
}

describe('package installs through the egress proxy', () => {
  let index, gate, forbidden, sc;
  before(async () => {
    index = await startIndex();
    gate = await startGate(index.port);
    forbidden = await startForbidden();
    sc = await connectSandcastle({
      args: ['--pip-index-url', `http://127.0.0.1:${gate.port}/simple/`,
             '--npm-registry', `http://127.0.0.1:${index.port}/npm/`],
      timeoutMs: 120000,
    });
  });
  after(async () => {
    await sc?.close();
    index?.child.kill();
    gate?.srv.close();
    forbidden?.srv.close();
  });

  test('pip install waits, then the package imports in later calls', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    const r = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
    assert.equal(r.status, 'success', JSON.stringify(r));
    assert.deepEqual(r.packages.map((p) => [p.package, p.status]), [['sandcastle_demo', 'success']]);
    const run = await sc.ok('execute_code', { sandbox_id, code: 'import sandcastle_demo as d\nprint(d.greet("sandbox"), d.VERSION)' });
    assert.equal(run.stdout, 'hello sandbox from the local index 1.2.3\n', JSON.stringify(run));
    const st = await sc.ok('check_package_installation_status', { sandbox_id, package: 'sandcastle_demo' });
    assert.equal(st.status, 'success');
    const listed = await sc.ok('list_sandboxes');
    const mine = listed.sandboxes.find((s) => s.sandbox_id === sandbox_id);
    assert.deepEqual(mine.packages.map((p) => p.name), ['sandcastle_demo']);
    // The install's own files are not reported as the program's output.
    assert.deepEqual(run.files_created, []);
  });

  test('npm install in the background, polled until success', async () => {
    const { sandbox_id } = await sc.create({ language: 'javascript' });
    const started = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle-demo'], wait: false });
    assert.equal(started.status, 'installing');
    let status;
    for (let i = 0; i < 120; i++) {
      status = await sc.ok('check_package_installation_status', { sandbox_id, package: 'sandcastle-demo' });
      if (status.status !== 'installing') break;
      await sleep(250);
    }
    assert.equal(status.status, 'success', JSON.stringify(status));
    // npm's summary names no versions: the installed package.json says it.
    assert.equal(status.version, '4.5.6');
    const run = await sc.ok('execute_code', { sandbox_id, code: 'console.log(require("sandcastle-demo").greet("node"))' });
    assert.equal(run.stdout, 'hello node from the local registry\n');
  });

  // Each failure: the cause first, in one line; the installer's whole log
  // as a file in the sandbox (read_file, resources/read, a resource link).
  const failure = async (language, spec) => {
    const { sandbox_id } = await sc.create({ language });
    const r = await sc.err('install_packages', { sandbox_id, packages: [spec] });
    return { sandbox_id, r, first: r.text.split('\n')[0] };
  };

  test('a missing package: "package not found", the whole log as a file', async () => {
    const { sandbox_id, r, first } = await failure('python', 'no_such_package_xyz');
    assert.equal(first, `package not found: no_such_package_xyz is not on the index http://127.0.0.1:${gate.port}/simple/; check the name's spelling`);
    assert.equal(r.sc.cause, 'package_not_found');
    assert.match(r.sc.log.path, /^\/workspace\/\.sandcastle\/logs\/pip-install-\d+\.log$/);
    assert.match(r.text.split('\n')[1], /^Full installer log: \/workspace\/\.sandcastle\/logs\/pip-install-\d+\.log \(read_file, or sandbox:\/\//);
    const link = r.raw.content.find((c) => c.type === 'resource_link');
    assert.equal(link?.uri, r.sc.log.uri);
    const log = await sc.ok('read_file', { sandbox_id, path: r.sc.log.path });
    assert.match(log.content, /No matching distribution found for no_such_package_xyz/);
    assert.match(log.content, /^\$ \/usr\/bin\/python3 -I -m pip install /);
    const res = await sc.client.readResource({ uri: r.sc.log.uri });
    assert.match(res.contents[0].text, /No matching distribution found for no_such_package_xyz/);
    const st = await sc.ok('check_package_installation_status', { sandbox_id, package: 'no_such_package_xyz' });
    assert.equal(st.status, 'failed');
    assert.match(st.error, /^package not found: .*; full installer log: \/workspace\/\.sandcastle\/logs\/pip-install-\d+\.log$/);
    const nf = await sc.ok('check_package_installation_status', { sandbox_id, package: 'never_requested' });
    assert.equal(nf.status, 'not_found');
  });

  test('a version the index does not have: "no matching version" (pip, npm)', async () => {
    const pip = await failure('python', 'sandcastle_demo==9.9');
    assert.equal(pip.first, 'no matching version: sandcastle_demo==9.9; the index has 1.2.3');
    assert.equal(pip.r.sc.cause, 'no_matching_version');
    const npm = await failure('javascript', 'sandcastle-demo@9.9.9');
    assert.equal(npm.first, `no matching version: sandcastle-demo@9.9.9 is not published on http://127.0.0.1:${index.port}/npm/`);
    assert.equal(npm.r.sc.cause, 'no_matching_version');
    const missing = await failure('javascript', 'no-such-package-xyz');
    assert.equal(missing.first, `package not found: no-such-package-xyz@* is not on the registry http://127.0.0.1:${index.port}/npm/; check the name's spelling`);
    assert.equal(missing.r.sc.cause, 'package_not_found');
  });

  test('an index that sends the installer to another host: "blocked by the egress policy"', async () => {
    const { r, first } = await failure('python', 'sandcastle-elsewhere');
    assert.match(first, new RegExp(`^blocked by the egress policy: the installer tried to reach localhost:${index.port}, which is not a configured package index`));
    assert.equal(r.sc.cause, 'blocked_by_policy');
  });

  test('package names cannot smuggle installer options', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    for (const bad of ['--index-url=http://evil.example/simple', '-e .', '/etc/passwd', 'http://x/y.whl']) {
      const r = await sc.err('install_packages', { sandbox_id, packages: [bad] });
      assert.match(r.text, /not a valid pip package name/);
    }
  });

  test('code stays offline: neither the index nor another host listener is reachable', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    const code = `import socket\nfor port in (${index.port}, ${forbidden.port}, 3128):\n    s = socket.socket()\n    s.settimeout(2)\n    try:\n        s.connect(("127.0.0.1", port)); print(port, "connected")\n    except OSError as e:\n        print(port, type(e).__name__, e.errno)\n`;
    const run = await sc.ok('execute_code', { sandbox_id, code });
    for (const line of run.stdout.trim().split('\n')) assert.match(line, /ConnectionRefusedError 111$/, run.stdout);
    assert.equal(forbidden.hits.length, 0);
  });

  test('while an install runs, no other program in the sandbox can reach its proxy', async () => {
    const { sandbox_id } = await sc.create({ language: 'python' });
    // The kernel starts before the install: a program that was already there.
    const warm = await sc.ok('execute_code', { sandbox_id, code: 'print("up")' });
    assert.equal(warm.stdout, 'up\n');
    const { reached, release } = gate.hold();
    try {
      const started = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle_demo==1.2.3'], wait: false });
      assert.equal(started.status, 'installing');
      await reached;  // pip's first request came through the proxy and waits at the gate
      // Every loopback port, from the sandbox's kernel while the install's
      // proxy serves: each must be refused outright. (A connect to the very
      // port the kernel picked as its source is TCP's self-connect, not a
      // listener: not counted.)
      const code = 'import socket\nopen_ports, errnos = [], set()\nfor port in range(1, 65536):\n' +
        '    s = socket.socket()\n    try:\n        s.connect(("127.0.0.1", port))\n' +
        '        if s.getsockname() != s.getpeername(): open_ports.append(port)\n' +
        '    except OSError as e:\n        errnos.add(e.errno)\n    finally:\n        s.close()\n' +
        'print(open_ports, sorted(errnos))\n';
      const scan = await sc.ok('execute_code', { sandbox_id, code, timeout_s: 120 });
      assert.equal(scan.stdout, '[] [111]\n', JSON.stringify(scan));
      const st = await sc.ok('check_package_installation_status', { sandbox_id, package: 'sandcastle_demo' });
      assert.equal(st.status, 'installing', 'the scan ran while the install was under way');
    } finally {
      release();
    }
    let status;
    for (let i = 0; i < 240; i++) {
      status = await sc.ok('check_package_installation_status', { sandbox_id, package: 'sandcastle_demo' });
      if (status.status !== 'installing') break;
      await sleep(250);
    }
    assert.equal(status.status, 'success', JSON.stringify(status));
    const run = await sc.ok('execute_code', { sandbox_id, code: 'import sandcastle_demo as d\nprint(d.VERSION)' });
    assert.equal(run.stdout, '1.2.3\n', JSON.stringify(run));
  });

  // The installer is the only program with a way out, so nothing of the
  // sandbox's may run inside it: not the sandbox's configured environment,
  // nor files planted where pip would look by default. Each plant leaves a
  // marker if it ever runs.
  test('the installer runs nothing the sandbox planted (pip)', async () => {
    const { sandbox_id } = await sc.create({ language: 'python', env: { PYTHONPATH: '/workspace/plant' } });
    const plant = 'import os, sys\n' +
      'def plant(path, tag):\n' +
      '    os.makedirs(os.path.dirname(path), exist_ok=True)\n' +
      '    open(path, "w").write("open(\'/workspace/hijacked-%s\', \'w\').close()\\n" % tag)\n' +
      'plant("/workspace/pip/__init__.py", "cwd")\n' +
      'plant("/workspace/plant/pip/__init__.py", "pythonpath")\n' +
      'v = "python%d.%d" % sys.version_info[:2]\n' +
      'for home in ("/tmp", "/workspace"):\n' +
      '    plant(home + "/.local/lib/" + v + "/site-packages/usercustomize.py", "usersite")\n' +
      'print("planted")\n';
    assert.equal((await sc.ok('execute_code', { sandbox_id, code: plant })).stdout, 'planted\n');
    const r = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
    assert.equal(r.status, 'success', JSON.stringify(r));
    const check = await sc.ok('execute_code', { sandbox_id, code: 'import glob\nprint(sorted(glob.glob("/workspace/hijacked-*")))' });
    assert.equal(check.stdout, '[]\n');
  });

  test('the installer runs nothing the sandbox planted (npm)', async () => {
    const { sandbox_id } = await sc.create({ language: 'javascript', env: { NODE_OPTIONS: '--require /workspace/plant/evil.js' } });
    await sc.ok('write_file', { sandbox_id, path: '/workspace/plant/evil.js',
      content: "if (process.argv.some((a) => a.includes('npm'))) require('fs').writeFileSync('/workspace/hijacked-node-options', '');\n" });
    // npm reads .npmrc from $HOME (/tmp) and from the prefix, both the
    // sandbox's to write: settings there that run programs must not apply.
    await sc.ok('write_file', { sandbox_id, path: '/workspace/plant/shell.sh', executable: true,
      content: '#!/bin/sh\n: > /workspace/hijacked-script-shell\nexec /bin/sh "$@"\n' });
    // (npm ≥ 11 runs a registry package's install script only when allowed:
    // the planted files allow them all, so that the script-shell matters.)
    const npmrc = (tag) => 'dangerously-allow-all-scripts=true\n' +
      'script-shell=/workspace/plant/shell.sh\nnode-options=--require /workspace/plant/evil.js\n' +
      `node-gyp=/workspace/plant/shell.sh\ngit=/workspace/plant/shell.sh\n; ${tag}\n`;
    await sc.ok('write_file', { sandbox_id, path: '/tmp/.npmrc', content: npmrc('home') });
    await sc.ok('write_file', { sandbox_id, path: '/workspace/.sandcastle/node/.npmrc', content: npmrc('prefix') });
    const r = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle-demo'] });
    assert.equal(r.status, 'success', JSON.stringify(r));
    // The package's own install script ran (under /bin/sh).
    await sc.ok('read_file', { sandbox_id, path: '/workspace/.sandcastle/node/node_modules/sandcastle-demo/script-ran' });
    const check = await sc.ok('execute_code', { sandbox_id, code: 'console.log(require("fs").readdirSync("/workspace").filter((f) => f.startsWith("hijacked")))' });
    assert.equal(check.stdout, '[]\n');
  });
});
