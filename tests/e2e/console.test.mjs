// The web console in a real browser (headless Chromium via puppeteer-core):
// how the binary serves it (cache headers, ETags, gzip, CSP), the sign-in
// page, accessibility (axe-core: no serious or critical violations), the
// budget of the first load, and screenshots of each page
// ($SANDCASTLE_SCREENSHOTS, default build/screenshots/).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHttp, keys, tempStateDir } from './lib/http.mjs';
import { launchBrowser, newPage, screenshot, axeViolations, waitFor } from './lib/browser.mjs';

const HTML = { accept: 'text/html,application/xhtml+xml' };

describe('console: static serving', () => {
  let srv;
  before(async () => { srv = await startHttp([]); });
  after(async () => { await srv?.stop(); });

  test('GET / for a browser: the console, revalidated; its assets cached for good', async () => {
    const res = await fetch(`${srv.base}/`, { headers: HTML });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    assert.equal(res.headers.get('content-encoding'), 'gzip');  // fetch decodes it
    const csp = res.headers.get('content-security-policy');
    assert.match(csp, /default-src 'self'; script-src 'self';/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const html = await res.text();
    const base = html.match(/src="(\/assets\/[0-9a-f]{12})\/app\.js"/)[1];

    const js = await fetch(`${srv.base}${base}/app.js`);
    assert.equal(js.status, 200);
    assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(js.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const etag = js.headers.get('etag');
    assert.match(etag, /^"[0-9a-f]{16}-gz"$/);
    const again = await fetch(`${srv.base}${base}/app.js`, { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
    assert.equal((await again.arrayBuffer()).byteLength, 0);
    const idx = await fetch(`${srv.base}/`, { headers: { ...HTML, 'if-none-match': res.headers.get('etag') } });
    assert.equal(idx.status, 304);

    // A client without gzip gets the plain bytes, under another tag.
    const plain = await fetch(`${srv.base}${base}/app.js`, { headers: { 'accept-encoding': 'identity' } });
    assert.equal(plain.headers.get('content-encoding'), null);
    assert.notEqual(plain.headers.get('etag'), etag);
    assert.equal(await plain.text(), await js.text());

    assert.equal((await fetch(`${srv.base}/assets/000000000000/app.js`)).status, 404);
    assert.ok([400, 404].includes((await fetch(`${srv.base}${base}/..%2f..%2fmcp`)).status));
    assert.equal((await fetch(`${srv.base}${base}/app.js`, { method: 'POST' })).status, 405);
    // Programs still get the landing JSON.
    assert.equal((await fetch(`${srv.base}/`)).headers.get('content-type'), 'application/json');
  });
});

describe('console: in the browser', () => {
  let srv, browser, stateDir, adminKey;
  before(async () => {
    stateDir = tempStateDir();
    adminKey = keys(stateDir, 'create', '--name', 'console-e2e', '--admin').match(/\bsc_[A-Za-z0-9_-]+/)[0];
    srv = await startHttp(['--auth'], { stateDir });
    browser = await launchBrowser();
  });
  after(async () => { await browser?.close(); await srv?.stop(); });

  test('output: SVG images are blob: URLs, revoked when the output is cleared', async () => {
    const page = await newPage(browser);
    await page.goto(`${srv.base}/`, { waitUntil: 'load' });
    const r = await page.evaluate(async () => {
      const src = document.querySelector('script[src$="/app.js"]').src;
      const { OutputView } = await import(src.replace(/app\.js$/, 'output.js'));
      const live = new Set();
      const create = URL.createObjectURL.bind(URL);
      const revoke = URL.revokeObjectURL.bind(URL);
      URL.createObjectURL = (b) => { const u = create(b); live.add(u); return u; };
      URL.revokeObjectURL = (u) => { live.delete(u); revoke(u); };
      const el = document.createElement('div');
      const view = new OutputView(el);
      const svg = { 'image/svg+xml': '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>' };
      view.bundle(svg);
      view.bundle(svg);
      const shown = live.size;
      view.clear();
      const cleared = live.size;
      view.bundle(svg);
      return { shown, cleared, again: live.size, images: el.querySelectorAll('img').length };
    });
    assert.deepEqual(r, { shown: 2, cleared: 0, again: 1, images: 1 });
    await page.close();
  });

  test('the sign-in page: labelled, no CSP violation, axe finds nothing serious, light and dark', async () => {
    for (const scheme of ['light', 'dark']) {
      const page = await newPage(browser, { colorScheme: scheme });
      await page.goto(`${srv.base}/`, { waitUntil: 'load' });
      await page.waitForSelector('#api-key');
      assert.equal(await page.$eval('label:has(#api-key)', (l) => l.textContent.trim().startsWith('API key')), true);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'api-key');
      assert.deepEqual(page.problems.filter((p) => /CSP|pageerror/.test(p)), []);
      assert.deepEqual(await axeViolations(page), []);
      await screenshot(page, `signin-${scheme}`);
      await page.close();
    }
  });

  test('sign in with a key (HttpOnly, SameSite=Strict cookie), create a key (shown once), revoke it, sign out', async () => {
    const page = await newPage(browser);
    await page.goto(`${srv.base}/`, { waitUntil: 'load' });
    await page.waitForSelector('#api-key');
    await page.type('#api-key', 'sc_not_a_key');
    await page.keyboard.press('Enter');
    await waitFor(page, () => document.getElementById('signin-error')?.textContent.includes('not valid'));
    await page.$eval('#api-key', (e) => { e.value = ''; });
    await page.type('#api-key', adminKey);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#sandboxes-title');
    const cookie = (await page.cookies()).find((c) => c.name === 'sc_session');
    assert.ok(cookie);
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie), '');
    assert.equal(await page.$eval('#nav-keys', (e) => e.hidden), false);

    await page.goto(`${srv.base}/#/keys`);
    await page.waitForSelector('#key-name');
    await page.type('#key-name', 'made-in-console');
    await page.click('form[aria-label="Create a key"] button[type=submit]');
    const secret = await waitFor(page, () => document.getElementById('new-key-secret')?.textContent);
    assert.match(secret, /^sc_/);
    await waitFor(page, () => document.querySelector('tbody')?.textContent.includes('made-in-console'));
    assert.deepEqual(await axeViolations(page), []);
    await screenshot(page, 'keys');
    // The new key works, until it is revoked from the page.
    assert.equal((await fetch(`${srv.base}/api/v1/session`, { headers: { authorization: `Bearer ${secret}` } })).status, 200);
    await page.goto(`${srv.base}/#/health`);
    await page.goto(`${srv.base}/#/keys`);
    await page.waitForSelector('button[aria-label="Revoke key made-in-console"]');
    assert.equal(await page.evaluate((k) => document.body.textContent.includes(k), secret), false, 'the secret is shown once');
    await page.click('button[aria-label="Revoke key made-in-console"]');
    await waitFor(page, () => [...document.querySelectorAll('tbody tr')].some((r) => r.textContent.includes('made-in-console') && r.textContent.includes('revoked')));
    const refused = await fetch(`${srv.base}/api/v1/keys`, { headers: { authorization: `Bearer ${secret}` } });
    assert.equal(refused.status, 401);

    await page.click('#signout');
    await page.waitForSelector('#api-key');
    assert.equal((await page.cookies()).some((c) => c.name === 'sc_session' && c.value), false);
    assert.deepEqual(page.problems.filter((p) => /CSP|pageerror/.test(p)), []);
    await page.close();
  });

  test('the first load stays within 150 KiB compressed', async () => {
    // A fresh profile: nothing cached from the other tests.
    const context = await browser.createBrowserContext();
    const page = await newPage(context);
    const sizes = new Map();
    const cdp = await page.createCDPSession();
    await cdp.send('Network.enable');
    cdp.on('Network.loadingFinished', (e) => sizes.set(e.requestId, e.encodedDataLength));
    await page.goto(`${srv.base}/`, { waitUntil: 'networkidle0' });
    const total = [...sizes.values()].reduce((a, b) => a + b, 0);
    assert.ok(total > 5000 && total <= 150 * 1024, `first load ${total} bytes`);
    await context.close();
  });
});

describe('console: the MCP App view (run_result.html)', () => {
  let browser;
  before(async () => { browser = await launchBrowser({ width: 900, height: 700 }); });
  after(async () => { await browser?.close(); });

  test('a host\'s tool-result renders: stdout, stderr, the image from content, HTML only sandboxed, exit', async () => {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { REPO_ROOT } = await import('./lib/harness.mjs');
    const view = readFileSync(join(REPO_ROOT, 'web', 'run_result.html'), 'utf8');
    const page = await newPage(browser);
    // A minimal MCP Apps host: answers ui/initialize, then sends the result
    // of an execute_code call (structuredContent plus the image content).
    await page.setContent('<!doctype html><title>host</title><iframe id="app" sandbox="allow-scripts" style="width:800px;height:600px"></iframe>');
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAYAAADED76LAAAAHElEQVQYV2P8z8DwnwEJMDIwMDCiC2BXgK4SAL2LBAFkYQbGAAAAAElFTkSuQmCC';
    await page.evaluate((html, img) => {
      window.seen = [];
      const frame = document.getElementById('app');
      window.addEventListener('message', (ev) => {
        if (ev.source !== frame.contentWindow) return;
        const m = ev.data;
        window.seen.push(m.method || `response ${m.id}`);
        const reply = (msg) => frame.contentWindow.postMessage({ jsonrpc: '2.0', ...msg }, '*');
        if (m.method === 'ui/initialize') {
          reply({ id: m.id, result: { protocolVersion: m.params.protocolVersion, hostCapabilities: {}, hostInfo: { name: 'test-host', version: '1' }, hostContext: { theme: 'dark' } } });
        } else if (m.method === 'ui/notifications/initialized') {
          reply({ method: 'ui/notifications/tool-input', params: { arguments: { code: 'print(1)' } } });
          reply({ method: 'ui/notifications/tool-result', params: {
            content: [{ type: 'text', text: '{}' }, { type: 'image', data: img, mimeType: 'image/png' }],
            structuredContent: { stdout: 'one\n', stderr: 'careful\n', exit_code: 0, duration_ms: 12.5, truncated: false, reason: 'exited',
              displays: [{ 'image/png': { content_index: 1, bytes: 60 } }, { 'text/html': '<b>t</b><script>parent.postMessage("escaped","*")</script>' }] },
          } });
        }
      });
      frame.srcdoc = html;
    }, view, png);
    const app = await (async () => {
      for (let i = 0; i < 100; i++) {
        const f = page.frames().find((x) => x !== page.mainFrame() && x.parentFrame() === page.mainFrame());
        if (f && await f.$('p.meta .ok').catch(() => null)) return f;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`the view rendered no result; host saw ${JSON.stringify(await page.evaluate(() => window.seen))}`);
    })();
    assert.equal(await app.$eval('pre.code', (e) => e.textContent), 'print(1)');
    assert.equal(await app.$eval('pre.stdout', (e) => e.textContent), 'one\n');
    assert.equal(await app.$eval('pre.stderr', (e) => e.textContent), 'careful\n');
    assert.match(await app.$eval('img', (e) => e.src), /^data:image\/png;base64,iVBOR/);
    assert.equal(await app.$eval('iframe', (e) => e.getAttribute('sandbox')), '');
    assert.match(await app.$eval('p.meta', (e) => e.textContent), /exit 0 · exited · 13 ms/);
    assert.equal(await app.evaluate(() => document.documentElement.dataset.theme), 'dark');
    const seen = await page.evaluate(() => window.seen);
    assert.deepEqual(seen.slice(0, 2), ['ui/initialize', 'ui/notifications/initialized']);
    assert.ok(seen.includes('ui/notifications/size-changed'));
    assert.ok(!seen.includes('response undefined'), 'a script in the HTML output ran');
    await screenshot(page, 'mcp-app-run-result');
    await page.close();
  });
});
