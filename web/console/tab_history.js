// Run history: code, output, images, exit and duration of each run, newest
// first, with "older" paging.
import { get, sandboxPath } from './api.js';
import { fmtMs, h } from './dom.js';
import { highlight, highlightable } from './highlight.js';

export function historyTab(sb) {
  const list = h('ul', {});
  const more = h('button', { type: 'button', class: 'ghost', hidden: true }, 'Older runs');
  const status = h('p', { class: 'muted', role: 'status' }, 'Loading…');
  let before = 0;

  const entry = (e) => {
    const code = typeof e.input === 'string' ? e.input : JSON.stringify(e.input, null, 2);
    const pre = h('pre', { class: 'mono' });
    highlight(code || '', highlightable(e.language) ? e.language : '', pre);
    return h('li', {},
      h('div', {}, h('strong', {}, `#${e.seq}`), ` ${e.tool} · ${e.language || ''} · `,
        h('time', { datetime: e.at }, new Date(e.at).toLocaleString()), ` · exit ${e.exit_code} · ${e.reason || ''} · ${fmtMs(e.duration_ms)}`,
        e.images ? ` · ${e.images} image${e.images === 1 ? '' : 's'}` : ''),
      pre,
      e.stdout ? h('pre', { 'aria-label': 'stdout' }, e.stdout) : null,
      e.stderr ? h('pre', { class: 'err', 'aria-label': 'stderr' }, e.stderr) : null);
  };

  async function load() {
    more.disabled = true;
    try {
      const q = before ? `?cursor=${before}&limit=50` : '?limit=50';
      const r = await get(sandboxPath(sb.sandbox_id, `/history${q}`));
      for (const e of r.entries || []) list.append(entry(e));
      before = r.next_cursor || r.next_before || 0;
      more.hidden = !before;
      status.textContent = list.children.length ? '' : 'No runs yet.';
    } catch (e) {
      status.textContent = `History unavailable: ${e.message}`;
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener('click', load);
  load();
  return { el: h('div', { class: 'history' }, status, list, more) };
}
