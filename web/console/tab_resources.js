// Resource graphs: memory and CPU from the live usage events, and the
// sandbox's current usage and limits.
import { get, sandboxPath } from './api.js';
import { clear, fmtBytes, h } from './dom.js';
import { store, subscribe } from './live.js';
import { graph } from './sparkline.js';

function limitsText(l) {
  const parts = [];
  if (l.cpus !== undefined) parts.push(`${l.cpus} CPU`);
  if (l.memory_mb !== undefined) parts.push(`${l.memory_mb} MiB memory`);
  if (l.disk_mb !== undefined) parts.push(`${l.disk_mb} MiB disk`);
  if (l.pids !== undefined) parts.push(`${l.pids} processes`);
  if (l.timeout_s !== undefined) parts.push(`${l.timeout_s} s per command`);
  return parts.join(' · ') || '–';
}

export function resourcesTab(sb) {
  const graphs = h('div', { class: 'graphs' });
  const facts = h('dl', { class: 'kv', id: 'usage-facts' });
  const id = sb.sandbox_id;

  function paint() {
    const e = store.sandboxes.get(id);
    clear(graphs);
    const mem = e?.mem || [];
    const cpu = e?.cpu || [];
    const memMax = sb.limits?.memory_mb ? sb.limits.memory_mb * 1048576 : undefined;
    graphs.append(
      h('figure', { class: 'panel' }, h('figcaption', {}, `Memory: ${fmtBytes(mem[mem.length - 1])}${memMax ? ` of ${fmtBytes(memMax)}` : ''}`), graph(mem, { title: 'Memory', format: fmtBytes, max: memMax })),
      h('figure', { class: 'panel' }, h('figcaption', {}, `CPU: ${cpu.length ? cpu[cpu.length - 1].toFixed(0) : '–'}% of a core${sb.limits?.cpus ? ` (limit ${sb.limits.cpus})` : ''}`), graph(cpu, { title: 'CPU', format: (v) => `${v.toFixed(0)}%`, max: sb.limits?.cpus ? sb.limits.cpus * 100 : 100, color: 'var(--spark2)' })));
  }

  async function details() {
    try {
      const s = await get(sandboxPath(id));
      const u = s.usage || {};
      clear(facts);
      const row = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
      facts.append(...row('Memory now', fmtBytes(u.memory_bytes)), ...row('Peak memory', fmtBytes(u.peak_memory_bytes)),
        ...row('CPU time', u.cpu_ms === undefined ? '–' : `${(u.cpu_ms / 1000).toFixed(1)} s`), ...row('Processes', u.processes ?? '–'),
        ...row('Disk', fmtBytes(u.disk_bytes)), ...row('Limits', limitsText(s.limits || {})));
    } catch (e) {
      clear(facts).append(h('dt', {}, 'Usage'), h('dd', { class: 'err' }, e.message));
    }
  }

  const unsubscribe = subscribe((ids, full) => { if (full || ids.includes(id)) paint(); });
  paint();
  details();
  const timer = setInterval(details, 5000);
  return { el: h('div', {}, graphs, h('h2', {}, 'Usage'), facts), close() { unsubscribe(); clearInterval(timer); } };
}
