// File links serve a sandbox's files as hostile content: an HTML page a
// sandbox writes must never render as a page of the server's own origin
// (where its scripts could call /mcp with a loopback Origin). Every answer
// under /files/ is an attachment unless ?inline=1, never sniffed, under a CSP
// sandbox that loads nothing, without a Referer and uncached.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startHttp } from './lib/http.mjs';

const CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'";
const PAGE = '<html><body><script>fetch("/mcp",{method:"POST"})</script>hello</body></html>';

let srv, client, links;
before(async () => {
  srv = await startHttp(['--pool-size', '0']);
  client = new Client({ name: 'sandcastle-e2e-files', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(srv.url)));
  const made = await client.callTool({ name: 'create_sandbox', arguments: { language: 'python' } });
  const sandboxId = (made.structuredContent ?? JSON.parse(made.content[0].text)).sandbox_id;
  const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: sandboxId, code: [
    `open('page.html', 'w').write(${JSON.stringify(PAGE)})`,
    "open('pic.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>')",
    "open('r\\u00e9sum\\u00e9 \"q\".txt', 'w').write('x')",
  ].join('\n') } });
  assert.ok(!r.isError, JSON.stringify(r.content));
  const out = r.structuredContent ?? JSON.parse(r.content[0].text);
  links = Object.fromEntries(out.files_created.map((f) => [f.path, f.url]));
  assert.ok(links['page.html'] && links['pic.svg'], JSON.stringify(out.files_created));
});
after(async () => {
  await client?.close();
  await srv?.stop();
});

// GET with the path sent exactly as written (fetch would resolve dot segments).
function rawGet(path) {
  const u = new URL(srv.base);
  return new Promise((resolve, reject) => {
    http.get({ host: u.hostname, port: u.port, path }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, headers: new Headers(res.headers) }));
    }).on('error', reject);
  });
}

function assertHardened(res) {
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(res.headers.get('content-security-policy'), CSP);
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(res.headers.get('cache-control'), 'private, no-store');
}

describe('file links', () => {
  test('an HTML file is an attachment under a CSP sandbox, never sniffed', async () => {
    const res = await fetch(links['page.html']);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="page.html"');
    assertHardened(res);
    assert.equal(await res.text(), PAGE);
  });

  test('?inline=1 asks for inline display and keeps the sandbox; SVG too', async () => {
    for (const name of ['page.html', 'pic.svg']) {
      const res = await fetch(`${links[name]}&inline=1`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-disposition'), `inline; filename="${name}"`);
      assertHardened(res);
      await res.arrayBuffer();
    }
  });

  test('a name with quotes and non-ASCII: an ASCII fallback and the exact name in filename*', async () => {
    const url = links['résumé "q".txt'];
    assert.ok(url, JSON.stringify(Object.keys(links)));
    const res = await fetch(url);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-disposition'),
      `attachment; filename="r__sum__ _q_.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22q%22.txt`);
    await res.arrayBuffer();
  });

  test('a Range request still works, with the same headers', async () => {
    const res = await fetch(links['page.html'], { headers: { range: 'bytes=6-11' } });
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), `bytes 6-11/${PAGE.length}`);
    assert.equal(res.headers.get('content-disposition'), 'attachment; filename="page.html"');
    assertHardened(res);
    assert.equal(await res.text(), PAGE.slice(6, 12));
    const head = await fetch(links['page.html'], { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(PAGE.length));
    assertHardened(head);
  });

  test('a bad signature → 403, still hardened; dot segments and encoded slashes are no way around it', async () => {
    const bad = await fetch(links['page.html'].replace(/sig=[^&]+/, 'sig=AAAA'));
    assert.equal(bad.status, 403);
    assertHardened(bad);
    await bad.arrayBuffer();
    const u = new URL(links['page.html']);
    const [, , id] = u.pathname.split('/');
    for (const path of [`/files/${id}/x/../page.html`, `/files/${id}/x%2F..%2Fpage.html`, `/files/${id}/%2E%2E/etc/passwd`,
      `/files/${id}%2F..%2F${id}/page.html`, `/files/${id}/page.html%00.txt`]) {
      const res = await rawGet(`${path}${u.search}`);
      assert.ok(res.status === 404 || res.status === 403, `${path}: ${res.status}`);
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    }
  });
});
