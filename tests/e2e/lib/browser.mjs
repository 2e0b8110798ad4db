// Headless Chromium for the console's tests: Debian's `chromium` driven by
// puppeteer-core (no browser download), axe-core injected for accessibility
// checks, screenshots written to $SANDCASTLE_SCREENSHOTS (default
// build/screenshots/), and every console error and CSP violation recorded.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { REPO_ROOT } from './harness.mjs';

const require = createRequire(import.meta.url);
export const SCREENSHOTS = process.env.SANDCASTLE_SCREENSHOTS || join(REPO_ROOT, 'build', 'screenshots');
export const CHROMIUM = process.env.SANDCASTLE_CHROMIUM || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export async function launchBrowser({ width = 1280, height = 860 } = {}) {
  if (!CHROMIUM) throw new Error('no chromium: install Debian\'s chromium package (scripts/install-deps)');
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    defaultViewport: { width, height },
    // --no-sandbox: the tests run as root, where Chromium's own sandbox refuses to start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check', '--disable-extensions'],
  });
}

// A new page that records console errors, page errors and CSP violations
// (page.problems), with a default timeout fit for a loaded shared machine.
export async function newPage(browser, { colorScheme } = {}) {
  const page = await browser.newPage();
  page.setDefaultTimeout(20000);
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error') page.problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));
  });
  if (colorScheme) await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: colorScheme }]);
  return page;
}

export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

// Runs axe-core (WCAG 2.1 A/AA rules) on the page; returns the serious and
// critical violations as "rule: target" lines. axe is evaluated through the
// DevTools protocol, which the page's CSP does not govern (the console's own
// policy stays on).
export async function axeViolations(page, { include } = {}) {
  await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async (ctx) => {
    const r = await window.axe.run(ctx || document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] }, resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  }, include || null);
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.join(', ')}`);
}

// Waits until `fn` (evaluated in the page) returns a truthy value; returns it.
export async function waitFor(page, fn, arg, timeout = 20000) {
  const handle = await page.waitForFunction(fn, { timeout, polling: 100 }, arg);
  return handle.jsonValue();
}
