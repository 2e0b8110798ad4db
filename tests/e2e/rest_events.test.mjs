// GET /api/v1/events with more sandboxes than one usage turn samples: a
// tick samples at most 100 of an owner's sandboxes (in turns), every one
// of them is still reported within a few ticks, and a stream's first
// numbers come from the turns, not from a sampling of all at subscribe.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readSse, startHttp } from './lib/http.mjs';

const COUNT = 130;       // more than one turn (100) of the owner's sandboxes
const PER_TICK = 100;    // rest_events.cc's kSamplesPerTick

describe('REST events: usage in turns', () => {
  let srv, base;
  const ids = [];
  before(async () => {
    srv = await startHttp(['--pool-size', '0', '--max-sandboxes', String(COUNT + 10), '--max-per-key', '0']);
    base = srv.base;
    const create = async () => {
      const r = await fetch(`${base}/api/v1/sandboxes`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"language":"bash"}',
      });
      assert.equal(r.status, 201, await r.clone().text());
      ids.push((await r.json()).sandbox_id);
    };
    for (let i = 0; i < COUNT; i += 10) await Promise.all(Array.from({ length: Math.min(10, COUNT - i) }, create));
  });
  after(async () => { await srv?.stop(); });

  test(`${COUNT} sandboxes: each turn samples at most ${PER_TICK}, and all are reported`, async () => {
    const res = await fetch(`${base}/api/v1/events`);
    assert.equal(res.status, 200);
    const seen = new Set();
    const events = await readSse(res, (evs) => {
      for (const e of evs) if (e.event === 'usage') for (const s of e.data.samples) seen.add(s.sandbox_id);
      return seen.size >= COUNT;
    }, 20000);
    const snapshot = events.find((e) => e.event === 'snapshot');
    assert.equal(snapshot.data.sandboxes.length, COUNT);
    const usage = events.filter((e) => e.event === 'usage');
    assert.deepEqual([...ids].filter((id) => !seen.has(id)), [], 'every sandbox got its numbers');
    // Every sample is news to a new stream: the first turn sends a full one,
    // the second the rest; no event carries more than a turn.
    assert.ok(usage.length >= 2, `${usage.length} usage events`);
    assert.equal(usage[0].data.samples.length, PER_TICK);
    for (const u of usage) assert.ok(u.data.samples.length <= PER_TICK, `${u.data.samples.length} samples in one event`);
    for (const s of usage[0].data.samples) assert.equal(typeof s.memory_bytes, 'number');
  });
});
