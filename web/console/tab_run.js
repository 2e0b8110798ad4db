// The run pane: editor, language picker, run / interrupt / restart kernel,
// output streamed from the execution's SSE response as it runs.
import { ApiError, post, raw, readEvents, sandboxPath } from './api.js';
import { field, h, toast } from './dom.js';
import { createEditor } from './editor.js';
import { OutputView } from './output.js';

const SAMPLES = {
  python: 'import math\nxs = [math.sin(i / 5) for i in range(40)]\nprint(max(xs))\n',
  javascript: 'const xs = Array.from({ length: 5 }, (_, i) => i * i);\nconsole.log(xs);\n',
  bash: 'uname -a\nls -la\n',
};
const RUN_LANGUAGES = ['python', 'javascript', 'typescript', 'bash', 'sh', 'go', 'rust', 'c', 'cpp', 'java', 'ruby', 'perl'];

export function runTab(sb) {
  const start = RUN_LANGUAGES.includes(sb.language) ? sb.language : 'python';
  const lang = h('select', { id: 'run-language' }, RUN_LANGUAGES.map((l) => h('option', { value: l, selected: l === start }, l)));
  const out = h('div', { class: 'output', id: 'run-output', role: 'log', 'aria-live': 'polite', 'aria-label': 'Output' });
  const runBtn = h('button', { type: 'button', id: 'run' }, 'Run');
  const stopBtn = h('button', { type: 'button', class: 'ghost', id: 'interrupt', disabled: true }, 'Interrupt');
  const restartBtn = h('button', { type: 'button', class: 'ghost', id: 'restart' }, 'Restart kernel');
  const state = h('span', { class: 'muted', role: 'status', id: 'run-state' }, '');
  let controller = null;

  const editor = createEditor({ label: 'Code', value: SAMPLES[start] || '', language: start, onRun: () => run() });
  lang.addEventListener('change', () => editor.setLanguage(lang.value));

  const view = new OutputView(out);

  async function run() {
    if (controller) return;
    view.clear();  // the last run's output goes, its image URLs revoked
    controller = new AbortController();
    runBtn.disabled = true;
    stopBtn.disabled = false;
    state.textContent = 'Running…';
    const started = performance.now();
    let streamed = false;
    try {
      const res = await raw('POST', sandboxPath(sb.sandbox_id, '/executions'), {
        body: JSON.stringify({ kind: 'code', code: editor.value, language: lang.value }),
        type: 'application/json', accept: 'text/event-stream', signal: controller.signal,
      });
      if ((res.headers.get('content-type') || '').startsWith('text/event-stream')) {
        for await (const ev of readEvents(res)) {
          if (ev.event === 'stdout' || ev.event === 'stderr') { streamed = true; view.text(ev.event, ev.data?.text ?? ''); }
          else if (ev.event === 'display') { streamed = true; view.bundle(ev.data?.bundle); }
          else if (ev.event === 'result') view.result(ev.data, { streamed });
          else if (ev.event === 'error') view.text('stderr', `${ev.data?.detail || ev.data?.message || JSON.stringify(ev.data)}\n`);
        }
      } else {
        view.result(await res.json());
      }
      state.textContent = `Done in ${Math.round(performance.now() - started)} ms`;
    } catch (e) {
      if (e.name === 'AbortError') state.textContent = 'Stopped';
      else { view.text('stderr', `${e instanceof ApiError ? `${e.status} ${e.code}: ` : ''}${e.message}\n`); state.textContent = 'Failed'; }
    } finally {
      controller = null;
      runBtn.disabled = false;
      stopBtn.disabled = true;
    }
  }

  runBtn.addEventListener('click', run);
  stopBtn.addEventListener('click', async () => {
    state.textContent = 'Interrupting…';
    // The kernel gets a KeyboardInterrupt and keeps its variables; the
    // stream then ends with the interrupted result.
    try { await post(sandboxPath(sb.sandbox_id, '/interrupt')); } catch (e) { toast(`Interrupt failed: ${e.message}`, true); controller?.abort(); }
  });
  restartBtn.addEventListener('click', async () => {
    restartBtn.disabled = true;
    try { await post(sandboxPath(sb.sandbox_id, '/restart')); toast('Kernel restarted: variables are gone'); } catch (e) { toast(`Restart failed: ${e.message}`, true); } finally { restartBtn.disabled = false; }
  });

  const el = h('div', { class: 'split' },
    h('div', {},
      h('div', { class: 'row' }, field('Language', lang), runBtn, stopBtn, restartBtn, state),
      h('p', { class: 'muted', id: 'editor-help' }, 'Ctrl+Enter runs. Tab indents; press Escape then Tab to leave the editor.'),
      editor.el),
    h('div', {}, h('h2', {}, 'Output'), out));
  // Leaving the tab ends its run and revokes its output's image URLs.
  return { el, close() { controller?.abort(); view.clear(); } };
}
