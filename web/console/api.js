// The REST API (docs/rest-api.md) as the console uses it: JSON in and out,
// problem+json errors, the CSRF token on every unsafe request, and a reader
// of server-sent events from a fetch body (for POST streams).

// `epoch` counts sign-ins and sign-outs: a 401 answering a request of an
// earlier session (key A's, arriving after key B signed in) must not sign
// the new session out.
export const session = { csrf: '', authRequired: false, authenticated: false, keyId: '', admin: false, epoch: 0 };

// Tells the shell the session ended, unless `epoch` belongs to an older one.
export function sessionEnded(epoch) {
  if (epoch === session.epoch) window.dispatchEvent(new Event('sc-unauthorized'));
}

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.code = (problem && problem.code) || '';
    this.problem = problem;
  }
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function headers(method, extra = {}) {
  const h = { Accept: 'application/json', ...extra };
  if (UNSAFE.has(method) && session.csrf) h['X-CSRF-Token'] = session.csrf;
  return h;
}

async function problemOf(res) {
  const type = res.headers.get('content-type') || '';
  try {
    if (type.includes('json')) return await res.json();
    return { detail: (await res.text()).slice(0, 500) };
  } catch {
    return null;
  }
}

// fetch with the session's cookie and CSRF token; throws ApiError unless 2xx.
export async function raw(method, path, { body, type, accept, signal } = {}) {
  const extra = {};
  if (type) extra['Content-Type'] = type;
  if (accept) extra.Accept = accept;
  const epoch = session.epoch;
  const res = await fetch(path, { method, headers: headers(method, extra), body, signal, credentials: 'same-origin' });
  if (res.status === 401 && !path.startsWith('/api/v1/session')) sessionEnded(epoch);
  if (!res.ok) throw new ApiError(res.status, await problemOf(res));
  return res;
}

export async function api(method, path, body) {
  const res = await raw(method, path, body === undefined ? {} : { body: JSON.stringify(body), type: 'application/json' });
  if (res.status === 204) return null;
  const type = res.headers.get('content-type') || '';
  return type.includes('json') ? res.json() : res.text();
}

export const get = (p) => api('GET', p);
export const post = (p, b = {}) => api('POST', p, b);
export const del = (p) => api('DELETE', p);

export function sandboxPath(id, rest = '') {
  return `/api/v1/sandboxes/${encodeURIComponent(id)}${rest}`;
}

// Parses text/event-stream (WHATWG HTML §9.2.6) from a fetch Response,
// yielding {event, data} with data JSON-decoded when it parses.
export async function* readEvents(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = '';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
      if (line === '') {
        if (data.length) {
          const text = data.join('\n');
          let parsed = text;
          try { parsed = JSON.parse(text); } catch { /* plain text */ }
          yield { event: event || 'message', data: parsed };
        }
        event = '';
        data = [];
      } else if (line.startsWith(':')) {
        continue;
      } else {
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (name === 'event') event = v;
        else if (name === 'data') data.push(v);
      }
    }
  }
}

export async function loadSession() {
  const s = await get('/api/v1/session');
  session.authRequired = !!s.auth_required;
  session.authenticated = !!s.authenticated || !s.auth_required;
  session.keyId = s.key_id || '';
  session.admin = !!s.admin;
  session.csrf = s.csrf_token || '';
  return session;
}

export async function signIn(apiKey) {
  const s = await post('/api/v1/session', { api_key: apiKey });
  session.epoch++;
  session.authenticated = true;
  session.keyId = s.key_id || '';
  session.admin = !!s.admin;
  session.csrf = s.csrf_token || '';
  return session;
}

export async function signOut() {
  session.epoch++;
  await del('/api/v1/session');
  session.authenticated = false;
  session.csrf = '';
}
