// Sandboxes: the live list (one SSE stream; only changed rows are redrawn)
// and the create form.
import { get, post, del, sandboxPath } from './api.js';
import { badge, clear, field, fmtAge, fmtBytes, h, toast } from './dom.js';
import { store, subscribe } from './live.js';
import { sparkline, updateSparkline } from './sparkline.js';

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
  // A grid of rows with the ARIA table roles rather than a <table>: each row
  // is laid out on its own (content-visibility skips the ones off screen), so
  // a live list of hundreds of sandboxes redraws cheaply.
  const tbody = h('div', { role: 'rowgroup' });
  const table = h('div', { id: 'sandbox-table', class: 'gtable', role: 'table', 'aria-label': 'Your sandboxes' },
    h('div', { role: 'rowgroup' }, h('div', { role: 'row', class: 'grow-row head' }, ['Sandbox', 'Status', 'Image', 'Language', 'Owner', 'Age', 'Memory', 'CPU', 'Disk', 'Actions'].map((t, i) => h('div', { role: 'columnheader', class: i === 4 ? 'hide-narrow' : '' }, t)))),
    tbody);
  const empty = h('p', { class: 'muted', id: 'no-sandboxes', hidden: true }, 'No sandboxes yet: create one above.');
  const rows = new Map();

  // A row, and how to refresh its live cells in place (usage samples change
  // only memory, CPU, disk and age; an upsert rebuilds the row).
  const row = (e) => {
    const sb = e.sb;
    const id = sb.sandbox_id;
    const label = sb.name || id;
    const close = h('button', {
      type: 'button', class: 'danger', 'aria-label': `Close sandbox ${label}`,
      onclick: async (ev) => {
        const btn = ev.currentTarget;
        btn.disabled = true;
        try { await del(sandboxPath(id)); toast(`Closed ${label}`); } catch (ex) { toast(`Close failed: ${ex.message}`, true); btn.disabled = false; }
      },
    }, 'Close');
    const age = h('div', { role: 'cell', title: sb.created_at });
    const memLine = sparkline([], { width: 60 });
    const cpuLine = sparkline([], { width: 60, color: 'var(--spark2)' });
    const memText = document.createTextNode('');
    const cpuText = document.createTextNode('');
    const disk = h('div', { role: 'cell' });
    const tr = h('div', { role: 'row', class: 'grow-row', dataset: { id } },
      h('div', { role: 'cell', class: 'wrap' }, h('a', { href: `#/sandboxes/${encodeURIComponent(id)}` }, label), sb.name ? h('div', { class: 'muted mono' }, id) : null),
      h('div', { role: 'cell' }, badge(sb.status)),
      h('div', { role: 'cell', class: 'wrap' }, sb.image || '–'),
      h('div', { role: 'cell' }, sb.language || '–'),
      h('div', { role: 'cell', class: 'hide-narrow mono wrap' }, sb.owner === '' || sb.owner === undefined ? 'local' : sb.owner),
      age, h('div', { role: 'cell' }, memLine, memText), h('div', { role: 'cell' }, cpuLine, cpuText), disk, h('div', { role: 'cell' }, close));
    const update = (cur) => {
      const memNow = cur.mem.length ? cur.mem[cur.mem.length - 1] : undefined;
      const cpuNow = cur.cpu.length ? cur.cpu[cur.cpu.length - 1] : undefined;
      const cpuPct = cpuNow === undefined ? '–' : `${cpuNow.toFixed(0)}%`;
      age.textContent = fmtAge(sb.created_at);
      updateSparkline(memLine, cur.mem, { width: 60, label: `memory ${fmtBytes(memNow)}` });
      memText.data = ` ${fmtBytes(memNow)}`;
      updateSparkline(cpuLine, cur.cpu, { width: 60, label: `CPU ${cpuPct}` });
      cpuText.data = ` ${cpuPct}`;
      disk.textContent = fmtBytes(cur.disk);
    };
    update(e);
    return { tr, sb, update };
  };

  // Changes arrive in bursts (a usage event names many sandboxes): redraw
  // once per frame, only what changed.
  const dirty = new Set();
  let full = true;
  let frame = 0;
  // Resolved once the first snapshot (or the stream's failure) is on screen.
  let shown;
  const ready = new Promise((r) => { shown = r; });
  const paint = () => {
    frame = 0;
    if (store.loaded || store.error) shown();
    if (full) {
      clear(tbody);
      rows.clear();
      const all = [...store.sandboxes.values()].sort((a, b) => String(b.sb.created_at).localeCompare(String(a.sb.created_at)));
      for (const e of all) { const r = row(e); rows.set(e.sb.sandbox_id, r); tbody.append(r.tr); }
    } else {
      for (const id of dirty) {
        const e = store.sandboxes.get(id);
        const old = rows.get(id);
        if (!e) { old?.tr.remove(); rows.delete(id); continue; }
        if (old && old.sb === e.sb) { old.update(e); continue; }
        const r = row(e);
        if (old) old.tr.replaceWith(r.tr); else tbody.prepend(r.tr);
        rows.set(id, r);
      }
    }
    dirty.clear();
    full = false;
    empty.hidden = store.sandboxes.size !== 0;
    status.textContent = store.connected ? `Live: ${store.sandboxes.size} sandbox${store.sandboxes.size === 1 ? '' : 'es'}` : (store.error || 'Connecting…');
  };
  if (store.loaded) { full = true; frame = requestAnimationFrame(paint); }
  const unsubscribe = subscribe((ids, isFull) => {
    if (isFull) full = true;
    for (const id of ids) dirty.add(id);
    if (!frame) frame = requestAnimationFrame(paint);
  });
  // Ages move on without events.
  const ticker = setInterval(() => { for (const r of rows.values()) r.update(store.sandboxes.get(r.sb.sandbox_id) || { mem: [], cpu: [] }); }, 30000);

  const el = h('section', { 'aria-labelledby': 'sandboxes-title' },
    h('h1', { id: 'sandboxes-title' }, 'Sandboxes'),
    createForm((sb) => { location.hash = `#/sandboxes/${encodeURIComponent(sb.sandbox_id)}`; }),
    status, h('div', { class: 'table-wrap' }, table), empty);
  return {
    el,
    title: 'Sandboxes',
    ready,
    close() { unsubscribe(); clearInterval(ticker); cancelAnimationFrame(frame); },
  };
}
