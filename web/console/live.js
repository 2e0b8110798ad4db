// The caller's sandboxes, live, from one SSE stream (GET /api/v1/events):
// a snapshot, then upserts, removals and usage samples. Keeps the last
// samples of each sandbox for sparklines and graphs; listeners hear which
// sandboxes changed, so a page re-renders only those.
import { get, session, sessionEnded } from './api.js';

const KEEP = 60;  // samples per series (2 minutes at one per 2 s)

export const store = {
  sandboxes: new Map(),  // id → {sb, mem: [], cpu: [], disk, cpuMs, at}
  connected: false,
  loaded: false,  // a snapshot arrived
  error: '',
};

const listeners = new Set();
let source = null;
let users = 0;

function emit(ids, full = false) {
  for (const fn of listeners) fn(ids, full);
}

function entry(sb) {
  let e = store.sandboxes.get(sb.sandbox_id);
  if (!e) {
    e = { sb, mem: [], cpu: [], disk: undefined, cpuMs: undefined, at: 0 };
    store.sandboxes.set(sb.sandbox_id, e);
  }
  e.sb = sb;
  if (sb.usage) sample(e, sb.usage, performance.now());
  return e;
}

function sample(e, u, now) {
  if (typeof u.memory_bytes === 'number') {
    e.mem.push(u.memory_bytes);
    if (e.mem.length > KEEP) e.mem.shift();
  }
  if (typeof u.cpu_ms === 'number') {
    if (e.cpuMs !== undefined && now > e.at) {
      // Share of one core over the interval, in percent.
      const pct = Math.max(0, ((u.cpu_ms - e.cpuMs) / (now - e.at)) * 100);
      e.cpu.push(pct);
      if (e.cpu.length > KEEP) e.cpu.shift();
    }
    e.cpuMs = u.cpu_ms;
    e.at = now;
  }
  if (typeof u.disk_bytes === 'number') e.disk = u.disk_bytes;
}

function connect() {
  const epoch = session.epoch;
  source = new EventSource('/api/v1/events');
  source.addEventListener('open', () => { store.connected = true; store.error = ''; emit([], true); });
  source.addEventListener('error', () => {
    store.connected = false;
    // CLOSED: the server refused the stream (signed out, or no such route).
    store.error = source.readyState === EventSource.CLOSED ? 'live updates stopped' : 'reconnecting…';
    if (source.readyState === EventSource.CLOSED) {
      source = null;
      // Refused because the session ended? Then the console signs in again.
      if (session.authRequired) {
        get('/api/v1/session').then((s) => { if (!s.authenticated) sessionEnded(epoch); }).catch(() => {});
      }
    }
    emit([], true);
  });
  source.addEventListener('snapshot', (ev) => {
    const d = JSON.parse(ev.data);
    const seen = new Set();
    for (const sb of d.sandboxes || []) { entry(sb); seen.add(sb.sandbox_id); }
    for (const id of [...store.sandboxes.keys()]) if (!seen.has(id)) store.sandboxes.delete(id);
    store.loaded = true;
    emit([], true);
  });
  source.addEventListener('upsert', (ev) => {
    const d = JSON.parse(ev.data);
    if (!d.sandbox?.sandbox_id) return;
    entry(d.sandbox);
    emit([d.sandbox.sandbox_id]);
  });
  source.addEventListener('remove', (ev) => {
    const d = JSON.parse(ev.data);
    if (store.sandboxes.delete(d.sandbox_id)) emit([d.sandbox_id]);
  });
  source.addEventListener('usage', (ev) => {
    const d = JSON.parse(ev.data);
    const now = performance.now();
    const ids = [];
    for (const s of d.samples || []) {
      const e = store.sandboxes.get(s.sandbox_id);
      if (!e) continue;
      sample(e, s, now);
      ids.push(s.sandbox_id);
    }
    if (ids.length) emit(ids);
  });
}

// Subscribes `fn(changedIds, full)`; returns the unsubscribe function. The
// stream stays open while anyone listens.
let idleTimer = 0;
export function subscribe(fn) {
  listeners.add(fn);
  clearTimeout(idleTimer);
  users++;
  // Any subscriber reopens a stream that signing out (or the server) closed.
  if (!source) connect();
  return () => {
    listeners.delete(fn);
    if (--users > 0) return;
    // Kept a while after the last page leaves, so moving between the list
    // and a sandbox keeps the graphs' history and costs no new snapshot.
    idleTimer = setTimeout(() => {
      source?.close();
      source = null;
      store.sandboxes.clear();
      store.connected = false;
      store.loaded = false;
    }, 60000);
  };
}

// Signing out ends the stream at once.
export function disconnect() {
  clearTimeout(idleTimer);
  source?.close();
  source = null;
  store.sandboxes.clear();
  store.connected = false;
  store.loaded = false;
}
