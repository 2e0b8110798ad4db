import { launchBrowser, newPage, screenshot, axeViolations } from './lib/browser.mjs';
const base = process.argv[2];
const b = await launchBrowser();
const page = await newPage(b);
await page.goto(base + '/', { waitUntil: 'load' });
await page.waitForSelector('#create-language');
await page.select('#create-language', 'python');
await page.click('form[aria-label="Create a sandbox"] button[type=submit]');
await page.waitForSelector('#run');
console.log('sandbox page', page.url());
await page.click('#run');
await page.waitForSelector('#run-output p.exit');
console.log('imgs', await page.$$eval('#run-output img', (x) => x.length), 'iframes', await page.$$eval('#run-output iframe', (x) => x.map((f) => f.getAttribute('sandbox'))));
await screenshot(page, 'walk-run');
console.log('axe run', await axeViolations(page));
for (const t of ['history', 'files', 'packages', 'terminal', 'resources']) {
  await page.click(`#tab-${t}`);
  await new Promise((r) => setTimeout(r, 1200));
  if (t === 'files') { await page.click('button.node[data-path="hello.txt"]'); await page.waitForSelector('#file-preview'); }
  if (t === 'packages') { await page.type('#package-names', 'demo'); await page.click('#install'); await page.waitForFunction(() => document.querySelector('#packages-table .st-installed')); }
  await screenshot(page, `walk-${t}`);
  console.log('axe', t, await axeViolations(page));
}
await page.goto(base + '/#/sandboxes', { waitUntil: 'load' });
await page.waitForFunction(() => document.querySelectorAll('#sandbox-table [role=rowgroup] [data-id]').length > 0);
await new Promise((r) => setTimeout(r, 1500));
await screenshot(page, 'walk-list');
console.log('axe list', await axeViolations(page));
for (const p of ['images', 'keys', 'health']) { await page.goto(`${base}/#/${p}`); await new Promise((r) => setTimeout(r, 800)); await screenshot(page, `walk-${p}`); console.log('axe', p, await axeViolations(page)); }
await page.setViewport({ width: 800, height: 900 });
await page.goto(base + '/#/sandboxes'); await new Promise((r) => setTimeout(r, 1000)); await screenshot(page, 'walk-list-800');
console.log('problems', page.problems);
await b.close();
