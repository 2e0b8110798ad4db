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
  let srv, browser, stateDir;
  before(async () => {
    stateDir = tempStateDir();
    keys(stateDir, 'create', '--name', 'console-e2e');
    srv = await startHttp([], { stateDir });
    browser = await launchBrowser();
  });
  after(async () => { await browser?.close(); await srv?.stop(); });

  test('the sign-in page: labelled, no CSP violation, axe finds nothing serious, light and dark', async () => {
    for (const scheme of ['light', 'dark']) {
      const page = await newPage(browser, { colorScheme: scheme });
      await page.goto(`${srv.base}/`, { waitUntil: 'load' });
      await page.waitForSelector('#api-key');
      assert.equal(await page.$eval('label:has(#api-key)', (l) => l.textContent.trim().startsWith('API key')), true);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'api-key');
      const problems = page.problems.filter((p) => !/Failed to load resource: the server responded with a status of (401|404)/.test(p));
      assert.deepEqual(problems.filter((p) => /CSP|pageerror/.test(p)), []);
      assert.deepEqual(await axeViolations(page), []);
      await screenshot(page, `signin-${scheme}`);
      await page.close();
    }
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
