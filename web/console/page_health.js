// Server health: GET /api/v1/health, refreshed every 5 s.
import { get } from './api.js';
import { clear, h } from './dom.js';

export function healthPage() {
  const facts = h('dl', { class: 'kv', id: 'health' });
  const status = h('p', { role: 'status', class: 'muted' }, 'Loading…');
  async function load() {
    try {
      const r = await get('/api/v1/health');
      clear(facts);
      for (const [k, v] of Object.entries(r)) facts.append(h('dt', {}, k.replace(/_/g, ' ')), h('dd', {}, typeof v === 'object' ? JSON.stringify(v) : String(v)));
      status.textContent = r.status === 'ok' ? 'The server is healthy.' : `Status: ${r.status}`;
    } catch (e) {
      status.textContent = `Health check failed: ${e.message}`;
    }
  }
  load();
  const timer = setInterval(load, 5000);
  const el = h('section', { 'aria-labelledby': 'health-title' }, h('h1', { id: 'health-title' }, 'Server health'), status, h('div', { class: 'panel' }, facts),
    h('p', { class: 'muted' }, 'Metrics for Prometheus are at ', h('code', {}, '/metrics'), '; the API description at ', h('a', { href: '/api/v1/openapi.json' }, '/api/v1/openapi.json'), '.'));
  return { el, title: 'Health', close() { clearInterval(timer); } };
}
