// A tenant who only has a sandbox, attacking the server through every file
// path it offers: read_file, write_file, upload_file, download_file,
// resources/read and file links. Symlinks into the sandbox's /proc (whose
// files act for whoever opens them), special files, trees and sparse files
// too large to hold. Run against the real binary over Streamable HTTP (file
// links need it); the server's own memory is read from its /proc status.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttp } from './lib/http.mjs';
import { tempDir } from './lib/sandbox_client.mjs';

const DOMAIN = '/proc/sys/kernel/domainname';
let srv, client, id, host, domainBefore;

async function call(name, args) {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args } }, CallToolResultSchema,
    { timeout: 60000 });
  const text = (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { isError: r.isError === true, sc: r.structuredContent, text };
}

async function ok(name, args) {
  const r = await call(name, args);
  assert.equal(r.isError, false, `${name}: ${r.text.slice(0, 400)}`);
  return r.sc;
}

async function sh(command) {
  const r = await ok('execute_command', { sandbox_id: id, command, timeout_s: 60 });
  assert.equal(r.exit_code, 0, r.stderr);
  return r.stdout;
}

// The server's resident memory, peak and now, in KiB.
function serverMemory() {
  const status = readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8');
  const kib = (k) => Number(status.match(new RegExp(`${k}:\\s+(\\d+)`))[1]);
  return { peak: kib('VmHWM'), now: kib('VmRSS') };
}

// A file link for `path`: execute_code lists a file it creates with a url.
async function linkFor(path) {
  const r = await ok('execute_command', { sandbox_id: id, command: `rm -f ${path}; echo made > ${path}` });
  const f = r.files_created.find((e) => e.path === path);
  assert.ok(f?.url, `a link for ${path}: ${JSON.stringify(r.files_created)}`);
  return f.url;
}

before(async () => {
  host = tempDir('sandcastle-hostile-');
  domainBefore = readFileSync(DOMAIN, 'utf8');
  srv = await startHttp(['--allow-host-path', host.dir]);
  client = new Client({ name: 'hostile-tenant', version: '1.0.0' }, { capabilities: {} });
  await client.connect(new StreamableHTTPClientTransport(new URL(srv.url)));
  id = (await ok('create_sandbox', { language: 'bash' })).sandbox_id;
});

after(async () => {
  // Should the server ever write the host's domainname again, put it back.
  if (readFileSync(DOMAIN, 'utf8') !== domainBefore) writeFileSync(DOMAIN, domainBefore.trim());
  await client?.close();
  await srv?.stop();
  host?.cleanup();
});

test('a symlink into /proc never makes the server write a host kernel setting', async () => {
  await sh('ln -sfn /proc/sys/kernel/domainname dom; ln -sfn /proc/sys/kernel dir');
  const src = join(host.dir, 'payload');
  writeFileSync(src, 'sandcastle-pwned');
  for (const path of ['dom', 'dir/domainname', '/workspace/dir/domainname']) {
    const w = await call('write_file', { sandbox_id: id, path, content: 'sandcastle-pwned' });
    assert.equal(w.isError, true, `write_file ${path}`);
    assert.match(w.text, /EACCES/, w.text);
    const u = await call('upload_file', { sandbox_id: id, source_path: src, dest_path: path });
    assert.equal(u.isError, true, `upload_file ${path}`);
    assert.match(u.text, /EACCES/, u.text);
  }
  assert.equal(readFileSync(DOMAIN, 'utf8'), domainBefore, 'the host domainname changed');
});

test('reads through a symlink into /proc see the sandbox, never the host', async () => {
  await sh('ln -sfn /proc/sys/kernel/hostname hn');
  const sandboxName = 'sandbox\n';
  const r = await ok('read_file', { sandbox_id: id, path: 'hn' });
  assert.equal(r.content, sandboxName);
  const dest = join(host.dir, 'hn.out');
  await ok('download_file', { sandbox_id: id, path: 'hn', dest_path: dest });
  assert.equal(readFileSync(dest, 'utf8'), sandboxName);
  const res = await client.request({ method: 'resources/read', params: { uri: `sandbox://${id}/hn` } },
    (await import('@modelcontextprotocol/sdk/types.js')).ReadResourceResultSchema);
  assert.equal(res.contents[0].text, sandboxName);
  // A file link made for a regular file that is then swapped for the link.
  const url = await linkFor('linked');
  await sh('ln -sfn /proc/sys/kernel/hostname linked');
  const got = await fetch(url);
  assert.equal(got.status, 200);
  assert.equal(await got.text(), sandboxName);
  if (hostname() !== 'sandbox') {
    for (const seen of [r.content, readFileSync(dest, 'utf8'), res.contents[0].text])
      assert.ok(!seen.includes(hostname()), 'host data came back');
  }
});

test('FIFOs, sockets and devices are refused by every file path, at once', async () => {
  await sh("mkfifo fifo; python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\"; ln -sfn /dev/zero zero");
  const url = await linkFor('fifo-link');
  await sh('rm fifo-link; mkfifo fifo-link');
  const t0 = performance.now();
  for (const [path, kind] of [['fifo', /is a FIFO/], ['sock', /is a socket/], ['zero', /is a character device/]]) {
    const r = await call('read_file', { sandbox_id: id, path });
    assert.equal(r.isError, true);
    assert.match(r.text, kind, r.text);
    const w = await call('write_file', { sandbox_id: id, path, content: 'x' });
    assert.equal(w.isError, true);
    assert.match(w.text, kind, w.text);
    const d = await call('download_file', { sandbox_id: id, path, dest_path: join(host.dir, 'special') });
    assert.equal(d.isError, true);
    assert.match(d.text, kind, d.text);
  }
  assert.equal(existsSync(join(host.dir, 'special')), false);
  // The host side too: a FIFO below an allowed directory, as source or
  // destination, is refused rather than waited on.
  execFileSync('mkfifo', [join(host.dir, 'hostfifo')]);
  const up = await call('upload_file', { sandbox_id: id, source_path: join(host.dir, 'hostfifo'), dest_path: 'up' });
  assert.equal(up.isError, true);
  assert.match(up.text, /is not a regular file/, up.text);
  await sh('echo data > plain');
  const down = await call('download_file', { sandbox_id: id, path: 'plain', dest_path: join(host.dir, 'hostfifo') });
  assert.equal(down.isError, true);
  assert.match(down.text, /is not a regular file/, down.text);
  const got = await fetch(url);
  assert.equal(got.status, 409);
  assert.match(await got.text(), /is a FIFO/);
  assert.ok(performance.now() - t0 < 10000, 'a special file held a call');
});

test('a huge tree and large sparse files leave the server\'s memory bounded', async () => {
  const mem0 = serverMemory();
  const run = await ok('execute_code', {
    sandbox_id: id, language: 'python', timeout_s: 60,
    code: "import os\nos.makedirs('tree', exist_ok=True)\nfor i in range(40000): open(f'tree/{i:05}', 'w').close()\n"
      + "for i in range(4):\n    with open(f'sparse{i}', 'wb') as f: f.truncate(256 << 20)\n",
  });
  assert.equal(run.files_created.length, 1000);
  assert.equal(run.files_created_truncated, true);
  // Counted up to the listing's cap (10,000 entries), not beyond.
  assert.ok(run.files_created_total > 9000 && run.files_created_total <= 10000,
    `files_created_total ${run.files_created_total}`);
  const ls = await ok('list_files', { sandbox_id: id, path: '/workspace', recursive: true });
  assert.equal(ls.truncated, true);
  assert.equal(ls.count, 10000);
  // Several whole reads of sparse files at once: each refused unread.
  const reads = await Promise.all([0, 1, 2, 3].map((i) => call('read_file', { sandbox_id: id, path: `sparse${i}` })));
  for (const r of reads) {
    assert.equal(r.isError, true);
    assert.match(r.text, /is 268435456 bytes; one read returns at most \d+ bytes: read it in parts/);
  }
  // A range from the far end comes back exact.
  const tail = await ok('read_file', { sandbox_id: id, path: 'sparse0', offset: (256 << 20) - 10, encoding: 'base64' });
  assert.equal(Buffer.from(tail.content, 'base64').length, 10);
  assert.equal(tail.eof, true);
  const mem1 = serverMemory();
  assert.ok(mem1.peak - mem0.peak < 96 * 1024, `server peak grew by ${mem1.peak - mem0.peak} KiB`);
  // Large ranged reads in many sandboxes at once: file data above 1 MiB
  // waits for the server-wide transfer budget (256 MiB) instead of piling up.
  const more = [];
  for (let i = 0; i < 7; i++) {
    const s = (await ok('create_sandbox', { language: 'bash' })).sandbox_id;
    await ok('execute_command', { sandbox_id: s, command: 'truncate -s 200M big' });
    more.push(s);
  }
  const big = await Promise.all([id, ...more].map((s) =>
    call('read_file', { sandbox_id: s, path: s === id ? 'sparse1' : 'big', length: 30 << 20, encoding: 'base64' })));
  // Each either completes or, having waited its turn for 10 s, says the
  // server is busy: never more at once than the budget.
  const done = big.filter((r) => !r.isError).length;
  for (const r of big.filter((x) => x.isError))
    assert.match(r.text, /the server is busy moving other large files \(\d+ of 256 MiB in flight\)/, r.text);
  assert.ok(done >= 1, `${done} of 8 large reads completed`);
  const mem2 = serverMemory();
  console.log(`server peak: ${mem0.peak} -> ${mem1.peak} -> ${mem2.peak} KiB; ${done} of 8 completed`);
  // The budget covers the reads and their copies until each reply is handed
  // to the transport; replies already written but not yet read by this
  // (deliberately slow, one-process) client stay queued outside it: 0.8 to
  // 1.2 GiB here. A known gap (see README, Bounds): asserted only as a
  // ceiling.
  assert.ok(mem2.peak - mem0.peak < 1536 * 1024, `server peak grew by ${mem2.peak - mem0.peak} KiB`);
  for (const s of more) await ok('close_sandbox', { sandbox_id: s });
});
