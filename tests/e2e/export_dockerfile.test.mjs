// export_dockerfile end to end: a session installs a package from a local
// index (fixtures/local_index.py on 127.0.0.1), writes and creates files,
// and exports; `podman build` of the export on a locally made base image
// (mmdebstrap bookworm with python3 + pip, `podman import`ed) gives an image
// where the same program prints the same output as in the sandbox. A
// dist-info whose Version carries a shell payload is refused, never written.
// Slow: ~40 s for mmdebstrap (the Debian mirror, the one network use allowed;
// SANDCASTLE_EXPORT_BASE_TAR=<rootfs tar> reuses one) plus ~20-60 s of podman
// and the store import.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN, E2E_DIR } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const run = promisify(execFile);
const onPath = (bin) => ['/usr/bin', '/bin', '/usr/sbin', '/usr/local/bin'].some((d) => existsSync(join(d, bin)));
const canBuild = process.getuid() === 0 && onPath('podman') && onPath('runc') && (process.env.SANDCASTLE_EXPORT_BASE_TAR || onPath('mmdebstrap'));
// podman wants a runroot of at most 50 characters.
const work = mkdtempSync('/tmp/scx-');

// podman's own storage for this test only (overlay: layers are diffs, so
// little to copy and to delete; `podman rmi` unmounts them), with the flags
// this machine needs (../shared/notes/machine.md).
const podman = ['--root', join(work, 'root'), '--runroot', join(work, 'run'), '--storage-driver', 'overlay', '--runtime', 'runc'];
const ulimits = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768'];
const pod = (args, opts = {}) => run('podman', [...podman, ...args], { maxBuffer: 64 << 20, ...opts });

function startIndex() {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py')], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

let index, sc;
before(async () => {
  index = await startIndex();
  sc = await connectSandcastle({
    args: ['--pip-index-url', `http://127.0.0.1:${index.port}/simple/`, '--npm-registry', `http://127.0.0.1:${index.port}/npm/`],
    timeoutMs: 180000,
  });
});
after(async () => {
  await sc?.close();
  index?.child.kill();
  if (existsSync(join(work, 'root'))) await pod(['rmi', '-a', '-f']).catch(() => {});
  rmSync(work, { recursive: true, force: true });
});

const MAIN_PY = [
  'import os, sandcastle_demo',
  'print(sandcastle_demo.greet("export"), sandcastle_demo.VERSION)',
  'print(open("data/input.txt").read().strip())',
  'print(open("out/made.txt").read().strip())',
  'print("GREETING=" + os.environ["GREETING"])',
  'print("cwd=" + os.getcwd())',
  '',
].join('\n');

// A session: a pinned install, files written (write_file) and created (by
// code), a hostile dist-info beside the real one; then the program's output.
async function session(client = sc, create = {}) {
  const { sandbox_id } = await client.create({ language: 'python', env: { GREETING: 'hi "there" $USER' }, ...create });
  const inst = await client.ok('install_packages', { sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
  assert.equal(inst.status, 'success', JSON.stringify(inst));
  await client.ok('write_file', { sandbox_id, path: 'main.py', content: MAIN_PY });
  await client.ok('write_file', { sandbox_id, path: 'data/input.txt', content: 'written by write_file\n' });
  const made = await client.ok('execute_code', { sandbox_id, code: 'import os\nos.makedirs("out", exist_ok=True)\nopen("out/made.txt", "w").write("created by code\\n")\nos.symlink("/etc/passwd", "link")' });
  assert.equal(made.exit_code, 0, JSON.stringify(made));
  // What a program in the sandbox could leave for the exporter to find.
  await client.ok('write_file', {
    sandbox_id,
    path: '.sandcastle/python/evil-1.0.dist-info/METADATA',
    content: 'Metadata-Version: 2.1\nName: evil\nVersion: 1.0; touch /tmp/pwned #\n',
  });
  const ran = await client.ok('execute_command', { sandbox_id, command: 'python3 main.py' });
  assert.equal(ran.exit_code, 0, JSON.stringify(ran));
  return { sandbox_id, output: ran.stdout };
}

test('export_dockerfile: packages pinned, files copied, hostile records refused', async () => {
  const { sandbox_id } = await session();
  const r = await sc.call('export_dockerfile', { sandbox_id });
  assert.equal(r.isError, false, r.text);
  const x = r.sc;
  assert.match(x.base_image, /^[a-z0-9]+:[a-z0-9.]+$/);
  assert.equal(x.host_userland, true);
  assert.deepEqual(x.packages.pip, [{ name: 'sandcastle_demo', version: '1.2.3' }]);
  assert.deepEqual(x.packages.npm, []);
  assert.deepEqual(x.refused, [{
    record: '/workspace/.sandcastle/python/evil-1.0.dist-info/METADATA',
    reason: "METADATA's Version is not a PEP 440 version",
  }]);
  assert.ok(!x.dockerfile.includes('evil') && !x.dockerfile.includes('pwned'), x.dockerfile);
  assert.match(x.dockerfile, new RegExp(`^# The sandbox ran on the host's userland \\(image "host"\\); ${x.base_image} is the release the host runs\\.$`, 'm'));
  assert.match(x.dockerfile, new RegExp(`^FROM ${x.base_image}$`, 'm'));
  assert.match(x.dockerfile, /^RUN \["python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--target", "\/workspace\/\.sandcastle\/python", "sandcastle_demo==1\.2\.3"\]$/m);
  assert.match(x.dockerfile, /^ENV GREETING="hi \\"there\\" \\\$USER"$/m);
  assert.match(x.dockerfile, /^WORKDIR \/workspace$/m);
  assert.match(x.dockerfile, /^COPY \["workspace\/", "\/workspace\/"\]$/m);
  // The session's commands, from its run history, as comments after the COPY.
  assert.match(x.dockerfile, /^# Commands this session ran \(execute_command, from its run history\), oldest first\.\n# Those that set up the environment can become RUN lines:\n#   python3 main\.py\n$/m);
  assert.equal(x.files, 3);
  assert.deepEqual(x.skipped, [{ path: 'link', reason: 'a symlink (not followed; recreate it in the Dockerfile)' }]);
  // Inline, and as links to the two files saved in the sandbox.
  assert.ok(r.raw.content.some((c) => c.type === 'text' && c.text === x.dockerfile));
  assert.match(x.context.path, /^\/workspace\/\.sandcastle\/export\/\d+\/context\.tar\.gz$/);
  const links = r.raw.content.filter((c) => c.type === 'resource_link').map((c) => c.uri);
  assert.deepEqual(links, [x.dockerfile_file.uri, x.context.uri]);
  const df = await sc.client.readResource({ uri: x.dockerfile_file.uri });
  assert.equal(df.contents[0].text, x.dockerfile);
  // The context: the Dockerfile at its root, the workspace's files, none of
  // .sandcastle/ (packages are rebuilt, not copied).
  const ctx = await sc.ok('read_file', { sandbox_id, path: x.context.path, encoding: 'base64' });
  const tgz = join(work, 'listing.tar.gz');
  writeFileSync(tgz, Buffer.from(ctx.content, 'base64'));
  const { stdout } = await run('tar', ['-tzf', tgz]);
  assert.deepEqual(stdout.trim().split('\n').sort(),
    ['Dockerfile', 'workspace/data/', 'workspace/data/input.txt', 'workspace/main.py', 'workspace/out/', 'workspace/out/made.txt'].sort());
});

// The host's release (what FROM names for image "host" sandboxes).
function hostRelease() {
  const text = readFileSync('/etc/os-release', 'utf8');
  const get = (k) => (text.match(new RegExp(`^${k}="?([^"\n]*)"?$`, 'm')) ?? [])[1];
  return { id: get('ID'), suite: get('VERSION_CODENAME') };
}

test('export → podman build → same output as the sandbox', { skip: (!canBuild && 'needs root, podman, runc and mmdebstrap (or SANDCASTLE_EXPORT_BASE_TAR)') || (hostRelease().id !== 'debian' && 'mmdebstrap makes Debian bases only'), timeout: 20 * 60_000 }, async (t) => {
  // The base, made once: the host's Debian release with python3 and pip.
  let baseTar = process.env.SANDCASTLE_EXPORT_BASE_TAR;
  if (!baseTar) {
    baseTar = join(work, 'base.tar');
    await run('mmdebstrap', ['--variant=apt', '--include=python3,python3-pip', '--format=tar', hostRelease().suite, baseTar], { maxBuffer: 64 << 20 });
  }
  // Into sandcastle's store, and a server on that store: the session runs in
  // the image where this build has image sandboxes, else on the host's
  // userland (whose FROM is the same Debian release).
  const state = join(work, 'state');
  await run(BIN, ['--state-dir', state, 'image', 'import', baseTar, '--name', 'debian-export-base'], { maxBuffer: 64 << 20 });
  const sc2 = await connectSandcastle({
    args: ['--state-dir', state, '--pip-index-url', `http://127.0.0.1:${index.port}/simple/`],
    timeoutMs: 180000,
  });
  t.after(() => sc2.close());
  const probe = await sc2.call('create_sandbox', { language: 'python', image: 'debian-export-base' });
  const create = probe.isError ? {} : { image: 'debian-export-base' };
  t.diagnostic(probe.isError ? `session on the host's userland (no image sandboxes: ${probe.text})` : 'session in the imported image');
  const { sandbox_id, output } = await session(sc2, create);
  const x = await sc2.ok('export_dockerfile', { sandbox_id });
  assert.equal(x.base_image, probe.isError ? `debian:${hostRelease().suite}` : 'debian-export-base');
  await pod(['import', baseTar, `localhost/${x.base_image}`]);

  const ctxDir = join(work, 'ctx');
  mkdirSync(ctxDir);
  const ctx = await sc2.ok('read_file', { sandbox_id, path: x.context.path, encoding: 'base64' });
  writeFileSync(join(work, 'context.tar.gz'), Buffer.from(ctx.content, 'base64'));
  await run('tar', ['-xzf', join(work, 'context.tar.gz'), '-C', ctxDir]);
  assert.equal(readFileSync(join(ctxDir, 'Dockerfile'), 'utf8'), x.dockerfile);

  // --network=host: the build's pip reaches the local index on 127.0.0.1
  // (the Dockerfile's PIP_INDEX_URL default is the server's index).
  await pod(['build', '--pull=never', '--network=host', ...ulimits, '-t', 'localhost/sc-export-test', ctxDir]);
  const built = await pod(['run', '--rm', '--network=none', ...ulimits, 'localhost/sc-export-test', 'python3', 'main.py']);
  assert.equal(built.stdout, output);
  assert.match(output, /^hello export from the local index 1\.2\.3\nwritten by write_file\ncreated by code\nGREETING=hi "there" \$USER\ncwd=\/workspace\n$/);
  // The refused record's payload ran nowhere.
  const pwned = await pod(['run', '--rm', '--network=none', ...ulimits, 'localhost/sc-export-test', 'sh', '-c', 'test ! -e /tmp/pwned && echo clean']);
  assert.equal(pwned.stdout, 'clean\n');
});

test('export_dockerfile: npm packages go through a manifest the server writes', async () => {
  const { sandbox_id } = await sc.create({ language: 'javascript' });
  const inst = await sc.ok('install_packages', { sandbox_id, packages: ['sandcastle-demo'] });
  assert.equal(inst.status, 'success', JSON.stringify(inst));
  const x = await sc.ok('export_dockerfile', { sandbox_id });
  assert.deepEqual(x.packages.npm, [{ name: 'sandcastle-demo', version: '4.5.6' }]);
  assert.match(x.dockerfile, /^COPY \["sandcastle-npm\/package\.json", "\/workspace\/\.sandcastle\/node\/package\.json"\]\nRUN \["npm", "install", "--prefix", "\/workspace\/\.sandcastle\/node", "--no-audit", "--no-fund"\]$/m);
  assert.match(x.dockerfile, /^ENV NODE_PATH="\/workspace\/\.sandcastle\/node\/node_modules"$/m);
  const ctx = await sc.ok('read_file', { sandbox_id, path: x.context.path, encoding: 'base64' });
  const dir = join(work, 'npm-ctx');
  mkdirSync(dir);
  writeFileSync(join(work, 'npm.tar.gz'), Buffer.from(ctx.content, 'base64'));
  await run('tar', ['-xzf', join(work, 'npm.tar.gz'), '-C', dir]);
  assert.deepEqual(JSON.parse(readFileSync(join(dir, 'sandcastle-npm', 'package.json'), 'utf8')).dependencies, { 'sandcastle-demo': '4.5.6' });

  // A dependency the sandbox added to its own manifest, with a name that
  // tries to climb out of node_modules: the whole manifest is refused.
  await sc.ok('write_file', { sandbox_id, path: '.sandcastle/node/package.json', content: JSON.stringify({ dependencies: { '../../../etc': '1.0.0' } }) });
  const bad = await sc.ok('export_dockerfile', { sandbox_id });
  assert.deepEqual(bad.packages.npm, []);
  assert.deepEqual(bad.refused, [{ record: '/workspace/.sandcastle/node/package.json', reason: 'package.json names a dependency that is not a valid npm name' }]);
});

test('export_dockerfile: a workspace past the context limit is refused, saying so', async () => {
  const { sandbox_id } = await sc.create({ language: 'python', limits: { disk_mb: 128 } });
  const big = await sc.ok('execute_command', { sandbox_id, command: 'head -c 40M /dev/zero > big.bin && echo ok' });
  assert.equal(big.stdout, 'ok\n', JSON.stringify(big));
  const r = await sc.err('export_dockerfile', { sandbox_id });
  assert.equal(r.text, "the workspace's files are more than the build context's limit of 32 MiB (the file tools' limit): remove large files from /workspace, or keep the session with save_sandbox [resource_exhausted]");
  // Nothing half-written is left behind.
  const listed = await sc.call('list_files', { sandbox_id, path: '.sandcastle/export' });
  assert.equal(listed.isError, true);
});
