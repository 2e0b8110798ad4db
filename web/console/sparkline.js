// Inline SVG sparklines and larger line graphs, built as SVG DOM (no canvas,
// no library): memory and CPU series from the live usage events.
const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function points(values, w, h, max) {
  if (values.length === 1) values = [values[0], values[0]];  // one sample: a flat line
  const n = values.length;
  const top = max ?? Math.max(1e-9, ...values);
  return values.map((v, i) => `${n === 1 ? w : (i * w) / (n - 1)},${(h - 1 - (Math.min(v, top) / top) * (h - 2)).toFixed(1)}`).join(' ');
}

// A small line of the last values; `label` is read out instead of the drawing.
export function sparkline(values, { width = 80, height = 20, max, label = '', color = 'var(--spark)' } = {}) {
  const el = svg('svg', { class: 'spark', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label });
  el.append(svg('polyline', { points: values.length ? points(values, width, height, max) : '', fill: 'none', stroke: color, 'stroke-width': 1.5 }));
  return el;
}

// Redraws a sparkline in place (no new nodes: a live list of hundreds of
// rows changes only attributes).
export function updateSparkline(el, values, { width = 80, height = 20, max, label = '' } = {}) {
  el.firstChild.setAttribute('points', values.length ? points(values, width, height, max) : '');
  el.setAttribute('aria-label', label);
}

// A graph with a title, axis maximum and the latest value.
export function graph(values, { title, format, max, color = 'var(--spark)' }) {
  const width = 320;
  const height = 100;
  const top = max ?? Math.max(1e-9, ...values, 0);
  const el = svg('svg', { width: '100%', height, viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `${title}: ${values.length ? format(values[values.length - 1]) : 'no data yet'}` });
  el.append(svg('rect', { x: 0, y: 0, width, height, fill: 'none', stroke: 'var(--line)' }));
  if (values.length) {
    el.append(svg('polyline', { points: points(values, width, height, top), fill: 'none', stroke: color, 'stroke-width': 2, 'vector-effect': 'non-scaling-stroke' }));
  }
  return el;
}
