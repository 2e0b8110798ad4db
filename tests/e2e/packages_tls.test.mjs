// install_packages on a host whose TLS is intercepted, or whose index uses a
// private CA: the test makes its own CA, serves the local index
// (fixtures/local_index.py) over https on 127.0.0.1 with a certificate from
// it, and gives sandcastle the CA only through the environment variables a
// host sets (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS). Without them, the install
// fails and says so first: "TLS verification failed". The host's proxy
// (HTTPS_PROXY, with credentials) is used for the way out, and NO_PROXY
// bypasses it. Also: an unreachable index is reported as such.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2E_DIR } from './lib/harness.mjs';
import { connectSandcastle } from './lib/sandbox_client.mjs';

function makeCa(dir) {
  const ossl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key',
    '-out', 'ca.pem', '-days', '2', '-subj', '/CN=sandcastle test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'srv.key',
    '-out', 'srv.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'srv.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' +
    'keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n');
  ossl('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem',
    '-days', '2', '-extfile', 'srv.ext');
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'srv.pem'), key: join(dir, 'srv.key') };
}

function startIndex(cert, key) {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [join(E2E_DIR, 'fixtures', 'local_index.py'), '--tls', cert, key],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.once('data', (d) => resolve({ child, port: Number(String(d).trim()) }));
    child.once('error', reject);
  });
}

// The host's own proxy: CONNECT only, records each target and its credentials.
function startHostProxy() {
  return new Promise((resolve) => {
    const seen = [];
    const srv = createHttpServer((req, res) => res.writeHead(405).end());
    srv.on('connect', (req, sock, head) => {
      seen.push({ target: req.url, auth: req.headers['proxy-authorization'] });
      const [host, port] = [req.url.slice(0, req.url.lastIndexOf(':')), Number(req.url.slice(req.url.lastIndexOf(':') + 1))];
      const up = connect(port, host, () => {
        sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) up.write(head);
        up.pipe(sock);
        sock.pipe(up);
      });
      up.on('error', () => sock.destroy());
      sock.on('error', () => up.destroy());
    });
    srv.listen(0, '127.0.0.1', () => resolve({ srv, port: srv.address().port, seen }));
  });
}

function closedPort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

describe('package installs from an index behind a private CA', () => {
  let dir, certs, index, hostProxy, pipIndex, npmRegistry;
  const servers = [];
  const start = async (env, pip = pipIndex) => {
    const sc = await connectSandcastle({ args: ['--pip-index-url', pip, '--npm-registry', npmRegistry], env, timeoutMs: 120000 });
    servers.push(sc);
    return sc;
  };
  const installs = async (sc) => {
    const py = await sc.create({ language: 'python' });
    const r = await sc.ok('install_packages', { sandbox_id: py.sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
    assert.equal(r.status, 'success', JSON.stringify(r));
    const run = await sc.ok('execute_code', { sandbox_id: py.sandbox_id, code: 'import sandcastle_demo as d\nprint(d.VERSION)' });
    assert.equal(run.stdout, '1.2.3\n');
    const js = await sc.create({ language: 'javascript' });
    const n = await sc.ok('install_packages', { sandbox_id: js.sandbox_id, packages: ['sandcastle-demo'] });
    assert.equal(n.status, 'success', JSON.stringify(n));
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sc-tls-'));
    certs = makeCa(dir);
    index = await startIndex(certs.cert, certs.key);
    hostProxy = await startHostProxy();
    pipIndex = `https://127.0.0.1:${index.port}/simple/`;
    npmRegistry = `https://127.0.0.1:${index.port}/npm/`;
  });
  after(async () => {
    for (const sc of servers) await sc.close();
    index?.child.kill();
    hostProxy?.srv.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('SSL_CERT_FILE given to the server: pip and npm install over https', async () => {
    await installs(await start({ SSL_CERT_FILE: certs.ca }));
  });

  test('NODE_EXTRA_CA_CERTS and the host\'s proxy with credentials: installs go through it', async () => {
    const before = hostProxy.seen.length;
    await installs(await start({ NODE_EXTRA_CA_CERTS: certs.ca, HTTPS_PROXY: `http://user:p%40ss@127.0.0.1:${hostProxy.port}` }));
    const seen = hostProxy.seen.slice(before);
    assert.ok(seen.length >= 2, JSON.stringify(seen));
    for (const s of seen) {
      assert.equal(s.target, `127.0.0.1:${index.port}`);
      assert.equal(s.auth, `Basic ${Buffer.from('user:p@ss').toString('base64')}`);
    }
  });

  test('without the CA: the install fails, cause first: TLS verification failed', async () => {
    const before = hostProxy.seen.length;
    // NO_PROXY names the index: the host's proxy is not used.
    const sc = await start({ HTTPS_PROXY: `http://127.0.0.1:${hostProxy.port}`, NO_PROXY: 'example.org, 127.0.0.1' });
    const py = await sc.create({ language: 'python' });
    const r = await sc.err('install_packages', { sandbox_id: py.sandbox_id, packages: ['sandcastle_demo==1.2.3'] });
    assert.match(r.text.split('\n')[0], /^TLS verification failed: the installer does not trust the certificate of https:\/\/127\.0\.0\.1:\d+\/simple\/ \(.*\); .*SSL_CERT_FILE or PIP_CERT/, r.text);
    assert.equal(r.sc.cause, 'tls_verification_failed');
    const js = await sc.create({ language: 'javascript' });
    const n = await sc.err('install_packages', { sandbox_id: js.sandbox_id, packages: ['sandcastle-demo'] });
    assert.match(n.text.split('\n')[0], /^TLS verification failed: .*NODE_EXTRA_CA_CERTS/, n.text);
    assert.equal(n.sc.cause, 'tls_verification_failed');
    assert.equal(hostProxy.seen.length, before, 'NO_PROXY bypassed the host proxy');
  });

  test('an index that does not answer, a host proxy that does not: "index unreachable", and why', async () => {
    const port = await closedPort();
    const sc = await start({}, `https://127.0.0.1:${port}/simple/`);
    const py = await sc.create({ language: 'python' });
    const r = await sc.err('install_packages', { sandbox_id: py.sandbox_id, packages: ['sandcastle_demo'], timeout_s: 120 });
    assert.equal(r.text.split('\n')[0], `index unreachable: https://127.0.0.1:${port}/simple/ could not be reached from this host ` +
      `(cannot connect to 127.0.0.1:${port}); check the index URL and the server's network and proxy settings (HTTPS_PROXY, NO_PROXY)`);
    assert.equal(r.sc.cause, 'index_unreachable');
    const viaDead = await start({ HTTPS_PROXY: `http://127.0.0.1:${port}` });
    const js = await viaDead.create({ language: 'javascript' });
    const n = await viaDead.err('install_packages', { sandbox_id: js.sandbox_id, packages: ['sandcastle-demo'] });
    assert.match(n.text.split('\n')[0], new RegExp(`^index unreachable: https://127\\.0\\.0\\.1:\\d+/npm/ could not be reached from this host \\(cannot connect to the host's proxy 127\\.0\\.0\\.1:${port}\\)`), n.text);
  });
});
