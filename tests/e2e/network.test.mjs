// Network modes through the official SDK client over stdio (issue 19):
// create_sandbox's `network`, what a program in an allowlist sandbox reaches,
// the refusals get_sandbox_status shows, set_sandbox_network on a live
// sandbox, and the operator's say over private ranges. Traffic stays on this
// host's loopback: the one allowed destination is a server the test runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connectSandcastle } from './lib/sandbox_client.mjs';

describe('network allowlist over MCP', () => {
  let sc;
  let web;
  let port;
  before(async () => {
    web = createServer((req, res) => res.end(`hello from the host, ${req.headers.host}`));
    await new Promise((r) => web.listen(0, '127.0.0.1', r));
    port = web.address().port;
    // The operator lets callers open this one loopback address.
    sc = await connectSandcastle({ env: { SANDCASTLE_NETWORK_PRIVATE_ALLOW: '127.0.0.1/32' }, timeoutMs: 60000 });
  });
  after(async () => {
    await sc?.close();
    web?.close();
  });

  test('the tools say how: create_sandbox takes network, set_sandbox_network exists', () => {
    const create = sc.tool('create_sandbox');
    assert.deepEqual(create.inputSchema.properties.network.properties.mode.enum, ['none', 'allowlist']);
    assert.ok(sc.tool('set_sandbox_network'));
  });

  test('a sandbox is offline unless asked', async () => {
    const s = await sc.create({ language: 'bash' });
    assert.deepEqual(s.network, { mode: 'none', allow: [], deny: [] });
    const r = await sc.ok('execute_command', { sandbox_id: s.sandbox_id, command: `curl -sS -m 5 http://127.0.0.1:${port}/; echo rc=$?` });
    assert.match(r.stdout, /rc=7/);  // ECONNREFUSED on its own loopback
    await sc.ok('close_sandbox', { sandbox_id: s.sandbox_id });
  });

  test('allowlist: the allowed address answers, others are refused with the reason, rules change live', async () => {
    const s = await sc.create({ language: 'bash', network: { mode: 'allowlist', allow: [`127.0.0.1/32:${port}`] } });
    assert.deepEqual(s.network, { mode: 'allowlist', allow: [`127.0.0.1:${port}`], deny: [] });
    const id = s.sandbox_id;
    const run = async (command) => (await sc.ok('execute_command', { sandbox_id: id, command })).stdout;
    // NO_PROXY names 127.0.0.1, so curl is told to use the proxy here.
    assert.equal(await run(`curl -sS --noproxy '' http://127.0.0.1:${port}/`), `hello from the host, 127.0.0.1:${port}`);
    assert.equal(await run(`curl -s --noproxy '' -o /dev/null -w '%{http_code}' http://127.0.0.1:${port + 1}/`), '403');
    assert.equal(await run("curl -s -o /dev/null -w '%{http_code}' http://198.51.100.77/"), '403');
    assert.match(await run("curl -s http://198.51.100.77/"), /sandcastle: 198\.51\.100\.77:80 refused \(not_allowed\)/);

    const status = await sc.ok('get_sandbox_status', { sandbox_id: id });
    assert.equal(status.network.mode, 'allowlist');
    const reasons = status.network.last_refusals.map((r) => r.reason);
    // Another port of an opened loopback address stays a built-in refusal.
    assert.deepEqual(reasons, ['private_address', 'not_allowed', 'not_allowed']);
    assert.ok(status.network.stats.allowed >= 1);

    const changed = await sc.ok('set_sandbox_network', { sandbox_id: id, allow: [] });
    assert.deepEqual(changed.network.allow, []);
    assert.equal(changed.closed_connections, 0);
    assert.equal(await run(`curl -s --noproxy '' -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/`), '403');
    await sc.ok('close_sandbox', { sandbox_id: id });
  });

  test('a range the operator did not open is refused, and so is a mode change', async () => {
    const r = await sc.err('create_sandbox', { network: { mode: 'allowlist', allow: ['10.0.0.0/8:*'] } });
    assert.match(r.text, /network\.allow\[0\] "10\.0\.0\.0\/8:\*" opens loopback, private.*private_allow.*\[permission_denied\]/);
    const s = await sc.create({ language: 'bash', network: { mode: 'allowlist' } });
    const m = await sc.err('set_sandbox_network', { sandbox_id: s.sandbox_id, mode: 'none' });
    assert.match(m.text, /fixed at creation/);
    const none = await sc.create({ language: 'bash' });
    const n = await sc.err('set_sandbox_network', { sandbox_id: none.sandbox_id, allow: ['a.test'] });
    assert.match(n.text, /network mode "none"/);
  });
});
