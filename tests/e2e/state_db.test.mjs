// The real binary refuses to start on a state database it cannot use, with
// a non-zero exit and a message on stderr naming the path: a corrupt file
// (left as it was), a state directory this user cannot write (an
// unprivileged user via setpriv, and a read-only bind mount), and a full
// disk (a tiny tmpfs in a private mount namespace, filled up).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from './lib/harness.mjs';

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
