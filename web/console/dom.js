// Small DOM helpers. Text from the server (sandbox output, file names, key
// names) always goes in as text nodes, never as markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function fmtBytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${u[i]}`;
}

export function fmtAge(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '–';
  let s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null) return '–';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

export function badge(status) {
  const s = String(status || 'unknown');
  return h('span', { class: `badge st-${s.replace(/[^a-z]/g, '')}` }, s);
}

let toastTimer = 0;
export function toast(msg, bad = false) {
  const box = document.getElementById('toast');
  const el = h('div', { class: bad ? 'bad' : '' }, msg);
  box.append(el);
  while (box.children.length > 4) box.firstChild.remove();
  clearTimeout(toastTimer);
  setTimeout(() => el.remove(), bad ? 8000 : 4000);
}

// A labelled field: <label>Text <input ...></label>.
export function field(text, control) {
  return h('label', {}, text, control);
}
