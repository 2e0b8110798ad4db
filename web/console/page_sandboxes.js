// Sandboxes: the live list (one SSE stream; only changed rows are redrawn)
// and the create form.
import { get, post, del, sandboxPath } from './api.js';
import { badge, clear, field, fmtAge, fmtBytes, h, toast } from './dom.js';
import { store, subscribe } from './live.js';
import { sparkline } from './sparkline.js';

const LANGUAGES = ['python', 'javascript', 'bash', 'typescript', 'go', 'rust', 'c', 'cpp', 'java', 'ruby', 'perl', 'sh'];

function createForm(onCreated) {
  const lang = h('select', { name: 'language', id: 'create-language' }, LANGUAGES.map((l) => h('option', { value: l }, l)));
  const images = h('datalist', { id: 'image-list' });
  const image = h('input', { name: 'image', list: 'image-list', placeholder: 'default for the language', id: 'create-image' });
  const name = h('input', { name: 'name', maxlength: 64, placeholder: 'optional', id: 'create-name', pattern: '[A-Za-z0-9._-]*' });
  const mem = h('input', { name: 'memory_mb', type: 'number', min: 16, max: 65536, placeholder: '512', id: 'create-memory' });
  const cpus = h('input', { name: 'cpus', type: 'number', min: 0.05, max: 64, step: 0.05, placeholder: '1', id: 'create-cpus' });
  const ttl = h('input', { name: 'ttl_s', type: 'number', min: 10, max: 604800, placeholder: '1800', id: 'create-ttl' });
  const persistent = h('input', { type: 'checkbox', name: 'persistent', id: 'create-persistent' });
  const submit = h('button', { type: 'submit' }, 'Create sandbox');
  get('/api/v1/images').then((r) => {
    for (const im of r.images || []) images.append(h('option', { value: im.name }));
  }).catch(() => {});
  const form = h('form', {
    class: 'panel row', 'aria-label': 'Create a sandbox',
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { language: lang.value, persistent: persistent.checked };
      if (image.value.trim()) body.image = image.value.trim();
      if (name.value.trim()) body.name = name.value.trim();
      if (ttl.value) body.ttl_s = Number(ttl.value);
      const limits = {};
      if (mem.value) limits.memory_mb = Number(mem.value);
      if (cpus.value) limits.cpus = Number(cpus.value);
      if (Object.keys(limits).length) body.limits = limits;
      submit.disabled = true;
      try {
        const sb = await post('/api/v1/sandboxes', body);
        toast(`Created ${sb.name || sb.sandbox_id}`);
        onCreated(sb);
      } catch (ex) {
        toast(`Create failed: ${ex.message}`, true);
      } finally {
        submit.disabled = false;
      }
    },
  },
  field('Language', lang), field('Image', image), images, field('Name', name),
  field('Memory (MiB)', mem), field('CPUs', cpus), field('Idle TTL (s)', ttl),
  h('label', { class: 'checkbox' }, h('span', {}, 'Persistent'), persistent), submit);
  return form;
}

export function sandboxesPage() {
  const status = h('p', { class: 'muted', role: 'status', id: 'live-status' }, 'Connecting…');
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'muted', id: 'no-sandboxes', hidden: true }, 'No sandboxes yet: create one above.');
  const table = h('table', { id: 'sandbox-table' },
    h('caption', { class: 'skip' }, 'Your sandboxes'),
    h('thead', {}, h('tr', {}, ['Sandbox', 'Status', 'Image', 'Language', 'Owner', 'Age', 'Memory', 'CPU', 'Disk', ''].map((t, i) => h('th', { scope: 'col', class: i === 4 ? 'hide-narrow' : '' }, t)))),
    tbody);
  const rows = new Map();

  const row = (e) => {
    const sb = e.sb;
    const id = sb.sandbox_id;
    const label = sb.name || id;
    const memNow = e.mem.length ? e.mem[e.mem.length - 1] : undefined;
    const cpuNow = e.cpu.length ? e.cpu[e.cpu.length - 1] : undefined;
    const close = h('button', {
      type: 'button', class: 'danger', 'aria-label': `Close sandbox ${label}`,
      onclick: async (ev) => {
        ev.currentTarget.disabled = true;
        try { await del(sandboxPath(id)); toast(`Closed ${label}`); } catch (ex) { toast(`Close failed: ${ex.message}`, true); ev.currentTarget.disabled = false; }
      },
    }, 'Close');
    return h('tr', { dataset: { id } },
      h('td', {}, h('a', { href: `#/sandboxes/${encodeURIComponent(id)}` }, label), sb.name ? h('div', { class: 'muted mono' }, id) : null),
      h('td', {}, badge(sb.status)),
      h('td', { class: 'wrap' }, sb.image || '–'),
      h('td', {}, sb.language || '–'),
      h('td', { class: 'hide-narrow mono' }, sb.owner === '' || sb.owner === undefined ? 'local' : sb.owner),
      h('td', { title: sb.created_at }, fmtAge(sb.created_at)),
      h('td', {}, sparkline(e.mem, { label: `memory ${fmtBytes(memNow)}`, max: sb.limits?.memory_mb ? sb.limits.memory_mb * 1048576 : undefined }), ' ', fmtBytes(memNow)),
      h('td', {}, sparkline(e.cpu, { label: `CPU ${cpuNow === undefined ? '–' : cpuNow.toFixed(0)}%`, color: 'var(--spark2)' }), ' ', cpuNow === undefined ? '–' : `${cpuNow.toFixed(0)}%`),
      h('td', {}, fmtBytes(e.disk)),
      h('td', {}, close));
  };

  // Changes arrive in bursts (a usage event names many sandboxes): redraw
  // once per frame, only the rows that changed.
  const dirty = new Set();
  let full = true;
  let frame = 0;
  const paint = () => {
    frame = 0;
    if (full) {
      clear(tbody);
      rows.clear();
      const all = [...store.sandboxes.values()].sort((a, b) => String(b.sb.created_at).localeCompare(String(a.sb.created_at)));
      for (const e of all) { const tr = row(e); rows.set(e.sb.sandbox_id, tr); tbody.append(tr); }
    } else {
      for (const id of dirty) {
        const e = store.sandboxes.get(id);
        const old = rows.get(id);
        if (!e) { old?.remove(); rows.delete(id); continue; }
        const tr = row(e);
        if (old) old.replaceWith(tr); else tbody.prepend(tr);
        rows.set(id, tr);
      }
    }
    dirty.clear();
    full = false;
    empty.hidden = store.sandboxes.size !== 0;
    status.textContent = store.connected ? `Live: ${store.sandboxes.size} sandbox${store.sandboxes.size === 1 ? '' : 'es'}` : (store.error || 'Connecting…');
  };
  const unsubscribe = subscribe((ids, isFull) => {
    if (isFull) full = true;
    for (const id of ids) dirty.add(id);
    if (!frame) frame = requestAnimationFrame(paint);
  });
  // Ages move on without events.
  const ticker = setInterval(() => { full = true; if (!frame) frame = requestAnimationFrame(paint); }, 30000);

  const el = h('section', { 'aria-labelledby': 'sandboxes-title' },
    h('h1', { id: 'sandboxes-title' }, 'Sandboxes'),
    createForm((sb) => { location.hash = `#/sandboxes/${encodeURIComponent(sb.sandbox_id)}`; }),
    status, h('div', { class: 'table-wrap' }, table), empty);
  return {
    el,
    title: 'Sandboxes',
    close() { unsubscribe(); clearInterval(ticker); cancelAnimationFrame(frame); },
  };
}
