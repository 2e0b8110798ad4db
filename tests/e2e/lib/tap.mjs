// Records every JSON-RPC message a client transport sends and receives, so a
// test can check the wire (e.g. the negotiated version, or that no response
// ever arrived for a cancelled request) while the SDK does the driving.
export function tap(transport) {
  const log = { in: [], out: [] };
  let inner;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get() {
      return inner && ((msg, extra) => { log.in.push(msg); return inner(msg, extra); });
    },
    set(fn) { inner = fn; },
  });
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => { log.out.push(msg); return send(msg, opts); };
  return log;
}

// The first outbound request with this method, and the inbound response to it.
export function exchange(log, method) {
  const req = log.out.find((m) => m.method === method && 'id' in m);
  if (!req) return {};
  const res = log.in.find((m) => m.id === req.id && ('result' in m || 'error' in m));
  return { req, res };
}
