// SEP-2243 custom headers on the wire: tools mark sandbox_id with
// x-mcp-header, clients mirror it as Mcp-Param-Sandbox-Id, and the server
// refuses a header that disagrees with the body, is malformed, or (2026-07-28
// only) is missing, with HTTP 400 and JSON-RPC -32020. Raw requests, so each
// case is exactly what a client or a router in front of sandcastle could send.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { modernMeta } from './lib/harness.mjs';
import { INIT, modernHeaders, openSession, parseSse, post, startHttp } from './lib/http.mjs';

const HEADER = 'mcp-param-sandbox-id';
const b64 = (s) => `=?base64?${Buffer.from(s).toString('base64')}?=`;
// get_sandbox_status of an id that does not exist: a tool result (isError)
// when the headers pass, a JSON-RPC error when they do not.
const ID = 'sb-nosuch';

let srv;
before(async () => { srv = await startHttp(['--test-fixtures']); });
after(async () => { await srv?.stop(); });

function assertRefused(r, what) {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(r.body.error.code, -32020, `${what}: ${r.text}`);
  assert.match(r.body.error.message, /Mcp-Param-Sandbox-Id/, what);
}

function assertPassed(r, what) {
  const msg = Array.isArray(r.body) ? r.body.find((e) => e.json?.id !== undefined)?.json : r.body;
  assert.equal(r.status, 200, `${what}: ${r.text}`);
  assert.equal(msg.error, undefined, `${what}: ${r.text}`);
  assert.ok(msg.result.content.length > 0, what);
}

test('every tool with sandbox_id marks it, once, as Sandbox-Id', async () => {
  const { headers } = await openSession(srv.url);
  const r = await post(srv.url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
  const marked = r.body.result.tools.filter((t) => t.inputSchema.properties?.sandbox_id);
  assert.ok(marked.length >= 10, `${marked.length} tools take sandbox_id`);
  for (const t of marked) {
    assert.equal(t.inputSchema.properties.sandbox_id['x-mcp-header'], 'Sandbox-Id', t.name);
    const marks = Object.values(t.inputSchema.properties).filter((p) => p['x-mcp-header'] !== undefined);
    assert.equal(marks.length, 1, t.name);
  }
});

describe('2026-07-28: clients must mirror', () => {
  const call = (args) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'get_sandbox_status', arguments: args, _meta: modernMeta() } });
  const headers = (extra = {}) => ({ ...modernHeaders('tools/call', 'get_sandbox_status'), ...extra });

  test('a matching header passes, plain or base64, header name in any case', async () => {
    assertPassed(await post(srv.url, call({ sandbox_id: ID }), headers({ [HEADER]: ID })), 'plain');
    assertPassed(await post(srv.url, call({ sandbox_id: ID }), headers({ [HEADER]: b64(ID) })), 'base64');
    assertPassed(await post(srv.url, call({ sandbox_id: ID }), headers({ 'MCP-PARAM-SANDBOX-ID': ID })), 'case');
    assertPassed(await post(srv.url, call({}), headers()), 'no argument, no header');
  });

  test('mismatched, malformed, missing or surplus headers → 400 -32020', async () => {
    const cases = [
      ['mismatch', { sandbox_id: ID }, { [HEADER]: 'sb-other' }],
      ['case of the value', { sandbox_id: ID }, { [HEADER]: ID.toUpperCase() }],
      ['base64 of another value', { sandbox_id: ID }, { [HEADER]: b64('sb-other') }],
      ['base64 without padding', { sandbox_id: 'Hello' }, { [HEADER]: '=?base64?SGVsbG8?=' }],
      ['base64 with bad characters', { sandbox_id: 'Hello' }, { [HEADER]: '=?base64?SGVs!!!bG8=?=' }],
      ['missing', { sandbox_id: ID }, {}],
      ['header without the argument', {}, { [HEADER]: ID }],
    ];
    for (const [what, args, extra] of cases) assertRefused(await post(srv.url, call(args), headers(extra)), what);
  });

  test('more than 16 Mcp-Param-* headers, or one over 1024 bytes → 400 -32020', async () => {
    const many = { [HEADER]: ID };
    for (let i = 0; i < 16; i++) many[`mcp-param-x${i}`] = 'v';
    const r = await post(srv.url, call({ sandbox_id: ID }), headers(many));
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.error.code, -32020);
    assert.match(r.body.error.message, /more than 16 Mcp-Param-\* headers/);
    const long = 'a'.repeat(1025);
    const l = await post(srv.url, call({ sandbox_id: long }), headers({ [HEADER]: long }));
    assert.equal(l.status, 400, l.text);
    assert.equal(l.body.error.code, -32020);
    assert.match(l.body.error.message, /over 1024 bytes/);
  });
});

describe('2025 eras: headers are checked when sent, not required', () => {
  const call = (args) => ({ jsonrpc: '2.0', id: 3, method: 'tools/call',
    params: { name: 'get_sandbox_status', arguments: args } });

  test('Streamable HTTP session: absent passes, matching passes, mismatched or malformed → 400 -32020', async () => {
    const { headers } = await openSession(srv.url, { version: '2025-06-18' });
    assertPassed(await post(srv.url, call({ sandbox_id: ID }), headers), 'absent');
    assertPassed(await post(srv.url, call({ sandbox_id: ID }), { ...headers, [HEADER]: b64(ID) }), 'matching');
    const bad = await post(srv.url, call({ sandbox_id: ID }), { ...headers, [HEADER]: 'sb-other' });
    assertRefused(bad, 'mismatch');
    assert.equal(bad.body.id, 3);
    assertRefused(await post(srv.url, call({ sandbox_id: ID }), { ...headers, [HEADER]: '=?base64?***?=' }), 'malformed');
  });

  test('HTTP+SSE /messages: a mismatched header is refused on the POST', async () => {
    const ac = new AbortController();
    const g = await fetch(srv.sseUrl, { headers: { accept: 'text/event-stream' }, signal: ac.signal });
    const reader = g.body.getReader();
    let text = '';
    while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
    const url = `${srv.base}${parseSse(text).find((e) => e.event === 'endpoint').data}`;
    assert.equal((await post(url, INIT('2024-11-05'))).status, 202);
    assert.equal((await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
    assertRefused(await post(url, call({ sandbox_id: ID }), { [HEADER]: 'sb-other' }), '/messages mismatch');
    assert.equal((await post(url, call({ sandbox_id: ID }), { [HEADER]: ID })).status, 202);
    ac.abort();
  });
});
