// Packages: install (pip or npm, from the server's configured index) and the
// live status of each, polled while any is pending.
import { get, post, sandboxPath } from './api.js';
import { badge, clear, field, h, toast } from './dom.js';

// Statuses after which a package changes no more; any other is polled.
const DONE = new Set(['success', 'installed', 'failed', 'error']);

export function packagesTab(sb) {
  const names = h('input', { id: 'package-names', placeholder: 'e.g. requests numpy==2.1', required: true });
  const manager = h('select', { id: 'package-manager' }, h('option', { value: '' }, 'default'), h('option', { value: 'pip' }, 'pip'), h('option', { value: 'npm' }, 'npm'));
  const tbody = h('tbody', {});
  const status = h('p', { class: 'muted', role: 'status', id: 'packages-status' });
  let timer = 0;
  let closed = false;

  function render(pkgs) {
    clear(tbody);
    for (const p of pkgs) {
      tbody.append(h('tr', { dataset: { name: p.name } }, h('td', {}, p.name), h('td', {}, p.manager || ''), h('td', {}, badge(p.status)), h('td', {}, p.version || ''), h('td', { class: 'wrap err' }, p.error || '')));
    }
    status.textContent = pkgs.length ? '' : 'No packages installed in this sandbox yet.';
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const r = await get(sandboxPath(sb.sandbox_id, '/packages'));
      const pkgs = r.packages || [];
      render(pkgs);
      if (!closed && pkgs.some((p) => !DONE.has(p.status))) timer = setTimeout(refresh, 1000);
    } catch (e) {
      status.textContent = `Packages unavailable: ${e.message}`;
    }
  }

  const form = h('form', {
    class: 'row panel', 'aria-label': 'Install packages',
    onsubmit: async (e) => {
      e.preventDefault();
      const list = names.value.split(/[\s,]+/).filter(Boolean);
      if (!list.length) return;
      const body = { packages: list, wait: false };
      if (manager.value) body.manager = manager.value;
      try {
        const r = await post(sandboxPath(sb.sandbox_id, '/packages'), body);
        if (r?.packages) render(r.packages);
        names.value = '';
        toast(`Installing ${list.join(', ')}`);
      } catch (ex) {
        toast(`Install failed: ${ex.message}`, true);
      }
      refresh();
    },
  }, h('div', { class: 'grow' }, field('Packages', names)), field('Manager', manager), h('button', { type: 'submit', id: 'install' }, 'Install'));

  refresh();
  const el = h('div', {}, form, status,
    h('table', { id: 'packages-table' }, h('thead', {}, h('tr', {}, ['Package', 'Manager', 'Status', 'Version', 'Error'].map((t) => h('th', { scope: 'col' }, t)))), tbody));
  return { el, close() { closed = true; clearTimeout(timer); } };
}
