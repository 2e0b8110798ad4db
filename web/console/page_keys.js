// API keys (admins only): create (the secret is shown once), revoke.
import { del, get, post } from './api.js';
import { clear, field, h, toast } from './dom.js';

export function keysPage() {
  const tbody = h('tbody', {});
  const status = h('p', { class: 'muted', role: 'status' }, 'Loading…');
  const secret = h('div', { 'aria-live': 'polite', id: 'new-key' });
  const name = h('input', { id: 'key-name', required: true, maxlength: 64 });
  const admin = h('input', { type: 'checkbox', id: 'key-admin' });

  async function load() {
    try {
      const r = await get('/api/v1/keys');
      clear(tbody);
      for (const k of r.keys || []) {
        tbody.append(h('tr', { dataset: { id: k.id } }, h('td', {}, k.name), h('td', { class: 'mono' }, k.id), h('td', {}, k.admin ? 'admin' : ''),
          h('td', {}, k.created_at || ''), h('td', {}, k.last_used_at || '–'), h('td', {}, k.revoked_at ? `revoked ${k.revoked_at}` : 'active'),
          h('td', {}, k.revoked_at ? '' : h('button', {
            type: 'button', class: 'danger', 'aria-label': `Revoke key ${k.name}`,
            onclick: async () => { try { await del(`/api/v1/keys/${encodeURIComponent(k.id)}`); toast(`Revoked ${k.name}`); load(); } catch (e) { toast(`Revoke failed: ${e.message}`, true); } },
          }, 'Revoke'))));
      }
      status.textContent = '';
    } catch (e) {
      status.textContent = e.status === 403 ? 'Only an admin key can manage keys.' : `Keys unavailable: ${e.message}`;
    }
  }

  const form = h('form', {
    class: 'row panel', 'aria-label': 'Create a key',
    onsubmit: async (e) => {
      e.preventDefault();
      try {
        const k = await post('/api/v1/keys', { name: name.value.trim(), admin: admin.checked });
        clear(secret).append(h('div', { class: 'secret panel' },
          h('p', {}, h('strong', {}, `Key "${k.name}" created.`), ' Copy it now: it is not shown again.'),
          h('code', { id: 'new-key-secret' }, k.key), ' ',
          h('button', { type: 'button', class: 'ghost', onclick: () => navigator.clipboard?.writeText(k.key).then(() => toast('Copied')) }, 'Copy')));
        name.value = '';
        admin.checked = false;
        load();
      } catch (ex) {
        toast(`Create failed: ${ex.message}`, true);
      }
    },
  }, field('Name', name), h('label', {}, h('span', {}, 'Admin'), admin), h('button', { type: 'submit' }, 'Create key'));

  load();
  const el = h('section', { 'aria-labelledby': 'keys-title' }, h('h1', { id: 'keys-title' }, 'API keys'), form, secret, status,
    h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Name', 'Id', 'Role', 'Created', 'Last used', 'State', ''].map((t) => h('th', { scope: 'col' }, t)))), tbody)));
  return { el, title: 'Keys', close() { clear(secret); } };
}
