// The terminal: a shell on a real PTY in the sandbox over a WebSocket
// (binary frames both ways, JSON text frames for resize and exit). The
// terminal emulator (xterm.js from npm, embedded at build time) loads only
// when this tab opens, so the console's first load stays small.
import { sandboxPath } from './api.js';
import { h } from './dom.js';

let xtermLoaded = null;
function loadXterm() {
  if (!xtermLoaded) {
    const css = h('link', { rel: 'stylesheet', href: new URL('./xterm.css', import.meta.url).href });
    document.head.append(css);
    xtermLoaded = Promise.all([import('./xterm.mjs'), import('./addon-fit.mjs')]);
  }
  return xtermLoaded;
}

export function terminalTab(sb) {
  const box = h('div', { class: 'term', id: 'terminal' });
  const status = h('p', { class: 'muted', role: 'status', id: 'terminal-status' }, 'Starting the terminal…');
  const reconnect = h('button', { type: 'button', class: 'ghost', hidden: true }, 'New session');
  let ws = null;
  let term = null;
  let observer = null;
  let closed = false;

  async function open() {
    reconnect.hidden = true;
    const [{ Terminal }, { FitAddon }] = await loadXterm();
    if (closed) return;
    if (!term) {
      const dark = getComputedStyle(document.documentElement).colorScheme === 'dark';
      term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, screenReaderMode: false, theme: dark ? {} : { background: '#111111' } });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box);
      fit.fit();
      observer = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
      observer.observe(box);
      term.onData((d) => { if (ws?.readyState === WebSocket.OPEN) ws.send(new TextEncoder().encode(d)); });
      term.onBinary((d) => { if (ws?.readyState === WebSocket.OPEN) ws.send(Uint8Array.from(d, (c) => c.charCodeAt(0))); });
      term.onResize(({ cols, rows }) => { if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows })); });
      term.textarea?.setAttribute('aria-label', 'Terminal input');
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(`${proto}//${location.host}${sandboxPath(sb.sandbox_id, `/terminal?cols=${term.cols}&rows=${term.rows}`)}`);
    ws.binaryType = 'arraybuffer';
    ws.addEventListener('open', () => { status.textContent = 'Connected: a shell in the sandbox.'; term.focus(); });
    ws.addEventListener('message', (ev) => {
      if (typeof ev.data === 'string') {
        let msg = null;
        try { msg = JSON.parse(ev.data); } catch { /* not control */ }
        if (msg?.type === 'exit') status.textContent = `The shell exited (code ${msg.code}).`;
        return;
      }
      term.write(new Uint8Array(ev.data));
    });
    ws.addEventListener('close', (ev) => {
      if (closed) return;
      if (!status.textContent.startsWith('The shell exited')) status.textContent = `Disconnected${ev.reason ? `: ${ev.reason}` : ''} (${ev.code}).`;
      reconnect.hidden = false;
    });
  }
  reconnect.addEventListener('click', () => { term?.reset(); open(); });
  open().catch((e) => { status.textContent = `The terminal failed to start: ${e.message}`; });
  return {
    el: h('div', {}, h('div', { class: 'row' }, status, reconnect), box),
    close() { closed = true; ws?.close(1000); observer?.disconnect(); term?.dispose(); },
  };
}
