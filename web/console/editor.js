// The code editor: a transparent <textarea> (which keeps native editing,
// selection, undo and accessibility) laid over a <pre> holding the same text
// highlighted. Tab indents; Ctrl/Cmd+Enter runs.
import { h } from './dom.js';
import { highlight } from './highlight.js';

export function createEditor({ label, value = '', language = 'python', onRun }) {
  const pre = h('pre', { 'aria-hidden': 'true' });
  const ta = h('textarea', {
    class: 'code', spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off',
    'aria-label': label, 'aria-describedby': 'editor-help',
  });
  ta.value = value;
  const box = h('div', { class: 'editor' }, pre, ta);
  let lang = language;

  const paint = () => {
    pre.textContent = '';
    // A trailing newline needs a character after it to take up a line.
    highlight(ta.value.endsWith('\n') ? `${ta.value} ` : ta.value || ' ', lang, pre);
    ta.style.height = `${Math.max(180, pre.scrollHeight)}px`;
  };
  ta.addEventListener('input', paint);
  ta.addEventListener('keydown', (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === 'Enter') {
      e.preventDefault();
      onRun?.();
    } else if (e.key === 'Tab' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && ta.dataset.tabTrap !== 'off') {
      // Tab indents; Escape then Tab leaves the editor (keyboard users are not trapped).
      e.preventDefault();
      ta.setRangeText('    ', ta.selectionStart, ta.selectionEnd, 'end');
      paint();
    } else if (e.key === 'Escape') {
      ta.dataset.tabTrap = 'off';
    }
  });
  ta.addEventListener('blur', () => { delete ta.dataset.tabTrap; });
  requestAnimationFrame(paint);
  return {
    el: box,
    textarea: ta,
    get value() { return ta.value; },
    set value(v) { ta.value = v; paint(); },
    setLanguage(l) { lang = l; paint(); },
  };
}
