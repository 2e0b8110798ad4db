// The real binary refuses to start on a state database it cannot use, with
// a non-zero exit and a message on stderr naming the path: a corrupt file
// (left as it was), a state directory this user cannot write (an
// unprivileged user via setpriv, and a read-only bind mount), and a full
// disk (a tiny tmpfs in a private mount namespace, filled up).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

// setpriv, chown and mount namespaces need root (as the tests run here).
const ROOT = { skip: process.getuid() !== 0 && 'needs root' };
const dirs = [];
function stateDir() {
  const d = mkdtempSync(join(tmpdir(), 'sandcastle-statedb-'));
  dirs.push(d);
  return d;
}
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

// Starts the server over stdio (stdin closed at once) and returns how it ended.
function start(cmd, args) {
  const r = spawnSync(cmd, args, { input: '', encoding: 'utf8', timeout: 20000 });
  return { status: r.status, stderr: r.stderr ?? '' };
}

test('a corrupt database stops the start and is left as it was', () => {
  const dir = stateDir();
  const db = join(dir, 'sandcastle.db');
  const garbage = Buffer.alloc(16384, 0x5a);
  writeFileSync(db, garbage);
  const r = start(BIN, ['--stdio', '--state-dir', dir]);
  assert.notEqual(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`state database ${db} is corrupt`), r.stderr);
  assert.ok(r.stderr.includes(`mv ${db} ${db}.corrupt`), r.stderr);
  assert.deepEqual(readFileSync(db), garbage, 'never reset');
});

// A database as a server leaves it at a clean stop, with ~2 MiB in a table
// of its own; returns its page count and a function that overwrites one
// page (1-based) from byte `from` of the page on with garbage.
function cleanlyStoppedDb(dir) {
  const made = start(BIN, ['--stdio', '--state-dir', dir]);
  assert.equal(made.status, 0, made.stderr);
  const db = join(dir, 'sandcastle.db');
  const py = spawnSync('/usr/bin/python3', ['-c', `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE bulk(a)")
c.executemany("INSERT INTO bulk VALUES(randomblob(1000))", [()] * 2000)
c.commit(); c.close()`, db], { encoding: 'utf8' });
  assert.equal(py.status, 0, py.stderr);
  const pages = statSync(db).size / 4096;
  assert.ok(pages > 400, `${pages} pages`);
  return {
    pages,
    spoil(page, from = 0) {
      const fd = openSync(db, 'r+');
      writeSync(fd, Buffer.alloc(4096 - from, 0xa5), 0, 4096 - from, (page - 1) * 4096 + from);
      closeSync(fd);
    },
  };
}

// A start reads the header and the schema, and the whole file (quick_check)
// only after a run that did not stop cleanly, or with --check-db.
test('after a clean stop, a damaged schema still stops the start; a damaged data page needs --check-db', () => {
  const dir = stateDir();
  const db = join(dir, 'sandcastle.db');
  cleanlyStoppedDb(dir).spoil(1, 100);
  const schema = start(BIN, ['--stdio', '--state-dir', dir]);
  assert.equal(schema.status, 2, schema.stderr);
  assert.ok(schema.stderr.includes(`state database ${db} is corrupt`), schema.stderr);

  const dir2 = stateDir();
  const db2 = join(dir2, 'sandcastle.db');
  const made = cleanlyStoppedDb(dir2);
  made.spoil(made.pages - 10);
  const cheap = start(BIN, ['--stdio', '--state-dir', dir2]);
  assert.equal(cheap.status, 0, `the cheap start does not read that page: ${cheap.stderr}`);
  const full = start(BIN, ['--stdio', '--state-dir', dir2, '--check-db']);
  assert.equal(full.status, 2, full.stderr);
  assert.ok(full.stderr.includes(`state database ${db2} is corrupt (quick_check:`), full.stderr);
});

test('after a kill -9, the next start reads the whole file and stops at a damaged page', async () => {
  const dir = stateDir();
  const db = join(dir, 'sandcastle.db');
  const made = cleanlyStoppedDb(dir);
  const sc = await connectSandcastle({ args: ['--state-dir', dir] });
  const proc = sc.transport._process;
  const gone = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGKILL');
  await gone;
  await sc.close().catch(() => {});
  made.spoil(made.pages - 10);
  const r = start(BIN, ['--stdio', '--state-dir', dir]);
  assert.equal(r.status, 2, r.stderr);
  assert.ok(r.stderr.includes(`state database ${db} is corrupt (quick_check:`), r.stderr);
});

test('a state directory the user cannot write stops the start (setpriv, unprivileged user)', ROOT, () => {
  const dir = stateDir();
  chmodSync(dir, 0o755);  // root's, not writable by nobody
  const r = start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', BIN, '--stdio', '--state-dir', dir]);
  assert.notEqual(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`state database ${join(dir, 'sandcastle.db')} is read-only`), r.stderr);
  assert.match(r.stderr, /Permission denied/);
});

test('a 0500 state directory of the unprivileged user itself stops the start', ROOT, () => {
  const dir = stateDir();
  chownSync(dir, 65534, 65534);
  chmodSync(dir, 0o500);
  const r = start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', BIN, '--stdio', '--state-dir', dir]);
  assert.notEqual(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`state database ${join(dir, 'sandcastle.db')} is read-only`), r.stderr);
  assert.match(r.stderr, /Permission denied/);
});

test('a read-only database file of the unprivileged user stops the start', ROOT, () => {
  const dir = stateDir();
  chownSync(dir, 65534, 65534);
  const made = start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', BIN, '--state-dir', dir,
    'keys', 'list']);
  assert.equal(made.status, 0, made.stderr);
  const db = join(dir, 'sandcastle.db');
  chmodSync(db, 0o400);
  const r = start('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', BIN, '--stdio', '--state-dir', dir]);
  assert.notEqual(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`state database ${db} is read-only`), r.stderr);
});

test('a read-only bind mount stops the start', ROOT, () => {
  const dir = stateDir();
  const script = `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" --stdio --state-dir "$1"`;
  const r = start('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script, 'sh', dir, BIN]);
  assert.notEqual(r.status, 0, r.stderr);
  assert.ok(r.stderr.includes(`state database ${join(dir, 'sandcastle.db')} is read-only`), r.stderr);
  assert.match(r.stderr, /Read-only file system/);
});

for (const existing of [false, true]) {
  test(`a full disk stops the start (${existing ? 'existing' : 'new'} database)`, ROOT, () => {
    const dir = stateDir();
    const script = `mount -t tmpfs -o size=512k tmpfs "$1" && ${existing ? '"$2" --state-dir "$1" keys list >/dev/null &&' : ''}
      (dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null; true) && exec "$2" --stdio --state-dir "$1"`;
    const r = start('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script, 'sh', dir, BIN]);
    assert.notEqual(r.status, 0, r.stderr);
    assert.ok(r.stderr.includes(`state database ${join(dir, 'sandcastle.db')}: the disk is full`), r.stderr);
    assert.ok(r.stderr.includes(`free space on the filesystem holding ${dir}`), r.stderr);
    assert.equal(existsSync(join(dir, 'filler')), false, 'the tmpfs was private to the namespace');
  });
}
