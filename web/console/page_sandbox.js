// One sandbox: its facts and actions, and tabs for run, history, files,
// packages, terminal and resources (#/sandboxes/<id>/<tab>).
import { del, get, sandboxPath } from './api.js';
import { append, badge, clear, fmtAge, h, toast } from './dom.js';
import { filesTab } from './tab_files.js';
import { historyTab } from './tab_history.js';
import { packagesTab } from './tab_packages.js';
import { resourcesTab } from './tab_resources.js';
import { runTab } from './tab_run.js';
import { terminalTab } from './tab_terminal.js';

const TABS = [
  ['run', 'Run', runTab], ['history', 'History', historyTab], ['files', 'Files', filesTab],
  ['packages', 'Packages', packagesTab], ['terminal', 'Terminal', terminalTab], ['resources', 'Resources', resourcesTab],
];

export function sandboxPage(id, tab) {
  const head = h('div', {}, h('h1', {}, id));
  const panel = h('div', { role: 'tabpanel', id: 'tab-panel', tabindex: '0' });
  const bar = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Sandbox views' });
  let current = null;
  let sb = null;
  let gone = false;

  function select(name, focus = false) {
    const t = TABS.find((x) => x[0] === name) || TABS[0];
    for (const b of bar.children) {
      const on = b.dataset.tab === t[0];
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
      if (on && focus) b.focus();
    }
    panel.setAttribute('aria-labelledby', `tab-${t[0]}`);
    current?.close?.();
    clear(panel);
    current = t[2](sb);
    panel.append(current.el);
    const want = `#/sandboxes/${encodeURIComponent(id)}/${t[0]}`;
    if (location.hash !== want) history.replaceState(null, '', want);
  }

  for (const [name, label] of TABS) {
    bar.append(h('button', { type: 'button', role: 'tab', id: `tab-${name}`, 'aria-controls': 'tab-panel', dataset: { tab: name }, onclick: () => select(name) }, label));
  }
  // Arrow keys move between tabs (WAI-ARIA tabs pattern).
  bar.addEventListener('keydown', (e) => {
    const i = TABS.findIndex((x) => x[0] === document.activeElement?.dataset?.tab);
    if (i < 0) return;
    const step = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
    if (!step) return;
    e.preventDefault();
    select(TABS[(i + step + TABS.length) % TABS.length][0], true);
  });

  (async () => {
    try {
      sb = await get(sandboxPath(id));
    } catch (e) {
      gone = true;
      clear(head).append(h('h1', {}, id), h('p', { class: 'err' }, e.status === 404 ? 'No such sandbox (it ended, or belongs to another key).' : e.message), h('a', { href: '#/sandboxes' }, 'Back to the list'));
      return;
    }
    if (gone) return;
    append(clear(head), [
      h('div', { class: 'row' }, h('h1', { style: 'margin:0' }, sb.name || sb.sandbox_id), badge(sb.status),
        h('span', { class: 'muted' }, `${sb.language} · ${sb.image} · created ${fmtAge(sb.created_at)} ago`),
        h('button', {
          type: 'button', class: 'danger', id: 'close-sandbox', style: 'margin-left:auto',
          onclick: async () => {
            try { await del(sandboxPath(sb.sandbox_id)); toast(`Closed ${sb.name || sb.sandbox_id}`); location.hash = '#/sandboxes'; } catch (e) { toast(`Close failed: ${e.message}`, true); }
          },
        }, 'Close sandbox')),
      sb.name ? h('p', { class: 'muted mono' }, sb.sandbox_id) : null]);
    head.after(bar);
    bar.after(panel);
    select(tab);
  })();

  return {
    el: h('section', {}, h('p', {}, h('a', { href: '#/sandboxes' }, '← Sandboxes')), head),
    title: id,
    close() { gone = true; current?.close?.(); },
  };
}
