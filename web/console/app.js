// The console's shell: theme, sign-in, navigation (hash routes, so the
// server serves one page), and the page modules.
import { ApiError, loadSession, session, signIn, signOut } from './api.js';
import { clear, field, h, toast } from './dom.js';
import { sandboxesPage } from './page_sandboxes.js';
import { disconnect } from './live.js';

const main = document.getElementById('main');
let teardown = null;

// --- theme: the system's unless the toggle chose one (kept in localStorage)
function applyTheme(t) {
  if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
  const dark = t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  const btn = document.getElementById('theme');
  btn.textContent = dark ? 'Light theme' : 'Dark theme';
}
function currentTheme() {
  try { return localStorage.getItem('sc-theme') || ''; } catch { return ''; }
}
applyTheme(currentTheme());
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => applyTheme(currentTheme()));
document.getElementById('theme').addEventListener('click', () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  try { localStorage.setItem('sc-theme', next); } catch { /* private mode */ }
  applyTheme(next);
});

// --- routes: #/sandboxes, #/sandboxes/<id>[/<tab>], #/images, #/keys, #/health
// The list is part of the first load; the other pages are modules of their
// own, fetched when first visited (or in the background once ready).
const LAZY = ['./page_sandbox.js', './page_images.js', './page_keys.js', './page_health.js'];
const routes = [
  [/^\/sandboxes\/([^/]+)(?:\/([a-z]+))?$/, async (m) => (await import('./page_sandbox.js')).sandboxPage(decodeURIComponent(m[1]), m[2] || 'run')],
  [/^\/sandboxes$/, () => sandboxesPage()],
  [/^\/images$/, async () => (await import('./page_images.js')).imagesPage()],
  [/^\/keys$/, async () => (await import('./page_keys.js')).keysPage()],
  [/^\/health$/, async () => (await import('./page_health.js')).healthPage()],
];

function setNav(name) {
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

let routeSeq = 0;
async function route() {
  if (!session.authenticated) return;
  const path = location.hash.replace(/^#/, '') || '/sandboxes';
  const seq = ++routeSeq;
  teardown?.();
  teardown = null;
  clear(main);
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (!m) continue;
    setNav(path.split('/')[1]);
    try {
      const p = await page(m);
      // Another navigation came while this page's module loaded.
      if (seq !== routeSeq) { p.close?.(); return; }
      main.append(p.el);
      teardown = p.close || null;
      document.title = `${p.title} · sandcastle`;
      // A page with live data is ready when its first data is shown.
      if (p.ready) await Promise.race([p.ready, new Promise((r) => setTimeout(r, 3000))]);
    } catch (e) {
      main.append(h('p', { class: 'err' }, String(e.message || e)));
    }
    return;
  }
  location.hash = '#/sandboxes';
}

function showSignIn(message = '') {
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  document.getElementById('who').textContent = '';
  clear(main);
  document.title = 'Sign in · sandcastle';
  const key = h('input', { type: 'password', name: 'api_key', autocomplete: 'current-password', required: true, id: 'api-key' });
  const err = h('p', { class: 'err', role: 'alert', id: 'signin-error' }, message);
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      try {
        await signIn(key.value.trim());
        key.value = '';
        start();
      } catch (ex) {
        err.textContent = ex instanceof ApiError && ex.status === 401 ? 'That key is not valid (or was revoked).' : `Sign-in failed: ${ex.message}`;
      }
    },
  }, field('API key', key), h('button', { type: 'submit' }, 'Sign in'), err);
  main.append(h('section', { class: 'signin panel', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to sandcastle'),
    h('p', { class: 'muted' }, 'Paste an API key (create one on the server with ', h('code', {}, 'sandcastle keys create --name <name>'), '). The console keeps a session cookie, never the key.'),
    form));
  key.focus();
  ready();
}

// The first screen can be used: a mark for bench/console_bench.mjs (time to
// interactive) and the browser tests.
function ready() {
  if (document.documentElement.dataset.ready) return;
  document.documentElement.dataset.ready = '1';
  performance.mark('sc-ready');
  const later = window.requestIdleCallback || ((f) => setTimeout(f, 200));
  later(() => { for (const m of LAZY) import(m).catch(() => {}); });
}

function start() {
  document.getElementById('loading')?.remove();
  document.getElementById('nav').hidden = false;
  document.getElementById('nav-keys').hidden = !session.admin;
  document.getElementById('signout').hidden = !session.authRequired;
  document.getElementById('who').textContent = session.authRequired ? `key ${session.keyId}` : 'local (no auth)';
  route().then(ready);
}

// Leaves the signed-in pages: a page whose module is still loading is
// closed when it arrives (routeSeq), so it keeps no subscription alive.
function leavePages() {
  routeSeq++;
  teardown?.();
  teardown = null;
  disconnect();
}

document.getElementById('signout').addEventListener('click', async () => {
  leavePages();
  try { await signOut(); } catch (e) { toast(`Sign-out failed: ${e.message}`, true); }
  showSignIn();
});

window.addEventListener('hashchange', route);
window.addEventListener('sc-unauthorized', () => {
  if (!session.authenticated) return;
  session.authenticated = false;
  session.epoch++;
  leavePages();
  showSignIn('Your session ended; sign in again.');
});

(async () => {
  try {
    await loadSession();
  } catch (e) {
    document.getElementById('loading')?.remove();
    showSignIn(`The server's API did not answer (${e.message}).`);
    return;
  }
  document.getElementById('loading')?.remove();
  if (session.authenticated) start();
  else showSignIn();
})();
