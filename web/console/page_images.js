// Images: what sandboxes can start from, and where each came from.
import { get } from './api.js';
import { clear, fmtBytes, h } from './dom.js';

export function imagesPage() {
  const tbody = h('tbody', {});
  const status = h('p', { class: 'muted', role: 'status' }, 'Loading…');
  get('/api/v1/images').then((r) => {
    clear(tbody);
    for (const im of r.images || []) {
      tbody.append(h('tr', {}, h('td', {}, im.name), h('td', { class: 'mono' }, String(im.id || '').slice(0, 19)),
        h('td', { class: 'wrap' }, (im.tags || []).join(', ')), h('td', { class: 'wrap' }, (im.languages || []).join(', ')),
        h('td', {}, im.size_bytes ? fmtBytes(im.size_bytes) : '–'), h('td', {}, im.source || ''), h('td', {}, im.created || '')));
    }
    status.textContent = `${(r.images || []).length} image(s). Save a sandbox as an image with the save_sandbox tool or POST /api/v1/sandboxes/{id}/save.`;
  }).catch((e) => { status.textContent = `Images unavailable: ${e.message}`; });
  const el = h('section', { 'aria-labelledby': 'images-title' }, h('h1', { id: 'images-title' }, 'Images'), status,
    h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ['Name', 'Id', 'Tags', 'Languages', 'Size', 'Source', 'Created'].map((t) => h('th', { scope: 'col' }, t)))), tbody)));
  return { el, title: 'Images' };
}
