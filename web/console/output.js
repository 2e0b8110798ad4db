// Renders a run's output: streamed text, kernel display bundles (images as
// <img>, HTML only inside a sandboxed iframe with no script, text as text),
// and the final structured result.
import { fmtMs, h } from './dom.js';

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
const MAX_TEXT = 2 * 1024 * 1024;  // per output pane; the rest is cut

export class OutputView {
  constructor(el) {
    this.el = el;
    this.size = 0;
    this.last = null;  // {stream, pre}
    this.urls = [];    // blob: URLs of SVG images, revoked when cleared
  }

  // Empties the pane for the next run; the blob: URLs of its images go too
  // (else each SVG output would keep its bytes for the page's lifetime).
  clear() {
    for (const url of this.urls) URL.revokeObjectURL(url);
    this.urls = [];
    this.el.textContent = '';
    this.size = 0;
    this.last = null;
  }

  text(stream, s) {
    if (!s) return;
    if (this.size > MAX_TEXT) return;
    this.size += s.length;
    if (!this.last || this.last.stream !== stream) {
      const pre = h('pre', { class: stream });
      this.el.append(pre);
      this.last = { stream, pre };
    }
    this.last.pre.append(this.size > MAX_TEXT ? `${s}\n… output cut in the console` : s);
    this.el.scrollTop = this.el.scrollHeight;
  }

  // A MIME bundle: {"image/png": base64, "text/html": "...", "text/plain": "..."}.
  // `content` resolves MCP-style {content_index} pointers when given.
  bundle(b, content = []) {
    if (!b || typeof b !== 'object') return;
    this.last = null;
    const dataOf = (v) => {
      if (typeof v === 'string') return v;
      if (v && typeof v.content_index === 'number') return content[v.content_index]?.data;
      return undefined;
    };
    for (const type of IMAGE_TYPES) {
      const data = dataOf(b[type]);
      if (typeof data === 'string' && /^[A-Za-z0-9+/=\s]+$/.test(data)) {
        this.el.append(h('img', { src: `data:${type};base64,${data.replace(/\s/g, '')}`, alt: `Image output (${type})` }));
        return;
      }
    }
    if (typeof b['image/svg+xml'] === 'string') {
      // SVG as an image: scripts in it never run, and it cannot reach the page.
      const url = URL.createObjectURL(new Blob([b['image/svg+xml']], { type: 'image/svg+xml' }));
      this.urls.push(url);
      this.el.append(h('img', { src: url, alt: 'Image output (SVG)' }));
      return;
    }
    if (typeof b['text/html'] === 'string') {
      // No allow-* token: no script, no same origin, no forms, no top navigation.
      const frame = h('iframe', { sandbox: '', title: 'HTML output', referrerpolicy: 'no-referrer' });
      frame.srcdoc = b['text/html'];
      this.el.append(frame);
      return;
    }
    if (typeof b['text/plain'] === 'string') this.el.append(h('pre', { class: 'result' }, b['text/plain']));
  }

  error(err) {
    if (!err) return;
    const tb = Array.isArray(err.traceback) ? err.traceback.join('\n') : '';
    this.text('stderr', tb || `${err.ename || 'Error'}: ${err.evalue || ''}\n`);
  }

  // The final structured result. Text already streamed is not repeated.
  result(r, { streamed = false, content = [] } = {}) {
    if (!r) return;
    if (!streamed) {
      this.text('stdout', r.stdout);
      this.text('stderr', r.stderr);
      for (const d of r.displays || []) this.bundle(d, content);
    }
    if (r.result) this.bundle(r.result, content);
    if (!streamed) this.error(r.error);
    else if (r.error && !this.el.querySelector('pre.stderr')) this.error(r.error);
    const ok = r.exit_code === 0 && (!r.reason || r.reason === 'exited' || r.reason === 'ok' || r.reason === 'completed');
    this.el.append(h('p', { class: `exit ${ok ? 'st-ok' : 'st-failed'}`, 'data-exit': r.exit_code },
      `exit ${r.exit_code}`, r.reason ? ` · ${r.reason}` : '', ` · ${fmtMs(r.duration_ms)}`,
      r.execution_count ? ` · [${r.execution_count}]` : '', r.truncated ? ' · output truncated' : ''));
    if (r.hint) this.el.append(h('p', { class: 'muted' }, r.hint));
  }
}
