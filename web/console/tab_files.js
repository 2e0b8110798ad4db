// The file browser: a tree of the sandbox's workdir (directories load when
// opened), preview of text and images, download, upload by drag and drop or
// picker (multipart), delete.
import { del, get, raw, sandboxPath, headers } from './api.js';
import { clear, fmtBytes, h, toast } from './dom.js';

const TEXT = /\.(txt|md|py|js|mjs|ts|json|csv|tsv|sh|c|h|cc|cpp|go|rs|rb|pl|java|toml|yaml|yml|ini|cfg|log|html|css|xml|sql)$/i;
const IMAGE = /\.(png|jpe?g|gif|webp)$/i;
const PREVIEW_MAX = 512 * 1024;

export function filesTab(sb) {
  const tree = h('div', { class: 'tree', role: 'navigation', 'aria-label': 'Files' });
  const preview = h('div', { class: 'preview', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Choose a file to preview it.'));
  const picker = h('input', { type: 'file', multiple: true, id: 'upload-input', class: 'skip' });
  const drop = h('div', { class: 'drop', id: 'drop-zone' }, 'Drop files here to upload them into ', h('code', { id: 'upload-dir' }, '.'), ' or ',
    h('label', { for: 'upload-input', class: 'button ghost', style: 'display:inline-block' }, 'choose files'), picker);
  let uploadDir = '';
  let selected = null;
  let root = '';
  const files = (q) => sandboxPath(sb.sandbox_id, `/files${q}`);

  async function list(path) {
    return get(files(path ? `?path=${encodeURIComponent(path)}` : ''));
  }

  function node(entry) {
    const li = h('li', {});
    const isDir = entry.type === 'directory' || entry.type === 'dir';
    const btn = h('button', {
      type: 'button', class: 'node', 'aria-expanded': isDir ? 'false' : undefined, dataset: { path: entry.path },
      onclick: async () => {
        if (selected) selected.removeAttribute('aria-current');
        selected = btn;
        btn.setAttribute('aria-current', 'true');
        if (isDir) {
          uploadDir = entry.path;
          document.getElementById('upload-dir').textContent = entry.path;
          const open = btn.getAttribute('aria-expanded') === 'true';
          btn.setAttribute('aria-expanded', String(!open));
          btn.firstChild.textContent = open ? '▸ ' : '▾ ';
          li.querySelector('ul')?.remove();
          if (!open) li.append(await children(entry.path));
        } else {
          show(entry);
        }
      },
    }, h('span', { class: 'twisty', 'aria-hidden': 'true' }, isDir ? '▸ ' : '  '), isDir ? `${entry.name}/` : entry.name, isDir ? '' : h('span', { class: 'muted' }, ` ${fmtBytes(entry.size)}`));
    li.append(btn);
    return li;
  }

  async function children(path) {
    const ul = h('ul', {});
    try {
      const r = await list(path);
      if (!path) root = r.path || '';
      const sorted = (r.entries || []).sort((a, b) => (a.type === b.type ? a.name.localeCompare(b.name) : a.type === 'directory' || a.type === 'dir' ? -1 : 1));
      for (const e of sorted) ul.append(node(e));
      if (!sorted.length) ul.append(h('li', { class: 'muted' }, 'empty'));
      if (r.truncated) ul.append(h('li', { class: 'muted' }, 'more entries not shown'));
    } catch (e) {
      ul.append(h('li', { class: 'err' }, e.message));
    }
    return ul;
  }

  async function refresh() {
    clear(tree);
    tree.append(await children(''));
  }

  function contentUrl(path, inline) {
    return files(`/content?path=${encodeURIComponent(path)}${inline ? '&inline=1' : ''}`);
  }

  async function show(entry) {
    clear(preview);
    const actions = h('div', { class: 'row' },
      h('a', { class: 'button', href: contentUrl(entry.path, false), download: entry.name, id: 'download-link' }, 'Download'),
      h('button', {
        type: 'button', class: 'danger', id: 'delete-file',
        onclick: async () => {
          try { await del(files(`?path=${encodeURIComponent(entry.path)}`)); toast(`Deleted ${entry.path}`); clear(preview); refresh(); } catch (e) { toast(`Delete failed: ${e.message}`, true); }
        },
      }, 'Delete'));
    preview.append(h('h2', {}, entry.path), h('p', { class: 'muted' }, `${fmtBytes(entry.size)}${entry.mtime ? ` · modified ${entry.mtime}` : ''}`), actions);
    if (IMAGE.test(entry.name) && entry.size <= 8 * PREVIEW_MAX) {
      preview.append(h('img', { src: contentUrl(entry.path, true), alt: `Preview of ${entry.name}` }));
    } else if ((TEXT.test(entry.name) || !/\.[^/]+$/.test(entry.name)) && entry.size <= PREVIEW_MAX) {
      try {
        const res = await raw('GET', contentUrl(entry.path, true));
        preview.append(h('pre', { id: 'file-preview' }, await res.text()));
      } catch (e) {
        preview.append(h('p', { class: 'err' }, e.message));
      }
    } else {
      preview.append(h('p', { class: 'muted' }, 'No preview for this file; download it.'));
    }
  }

  async function upload(list) {
    if (!list.length) return;
    const form = new FormData();
    form.append('path', uploadDir || root || '.');
    for (const f of list) form.append('file', f, f.name);
    try {
      const res = await fetch(files(''), { method: 'POST', body: form, headers: headers('POST'), credentials: 'same-origin' });
      if (!res.ok) throw new Error(((await res.json().catch(() => null)) || {}).detail || `HTTP ${res.status}`);
      const r = await res.json();
      toast(`Uploaded ${(r.files || []).map((f) => f.path).join(', ')}`);
      refresh();
    } catch (e) {
      toast(`Upload failed: ${e.message}`, true);
    }
  }

  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.classList.remove('over'); upload([...e.dataTransfer.files]); });
  picker.addEventListener('change', () => { upload([...picker.files]); picker.value = ''; });

  refresh();
  const el = h('div', { class: 'files' },
    h('div', { class: 'panel' }, h('div', { class: 'row' }, h('h2', { style: 'margin:0' }, 'Files'), h('button', { type: 'button', class: 'ghost', onclick: refresh, id: 'files-refresh' }, 'Refresh')), tree, drop),
    h('div', { class: 'panel' }, preview));
  return { el };
}
