// What only the engine backend does, through the tools (issue 17): images
// are the engine's (list_images, create_sandbox {image}), save_sandbox builds
// one there, and a missing image says where to get it. Runs in make test's
// engine stage (scripts/with-engine podman ...), which sets
// SANDCASTLE_ENGINE_URL; in the native run it is skipped, saying so.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { connectSandcastle } from './lib/sandbox_client.mjs';

const ENGINE = process.env.SANDCASTLE_ENGINE_URL;
const skip = ENGINE ? false : 'engine backend only: make test runs it in the engine stage (scripts/with-engine)';

// The engine's own view: sandcastle's containers it holds paused.
function pausedContainers() {
  const filters = encodeURIComponent(JSON.stringify({ status: ['paused'], label: ['sandcastle.sandbox'] }));
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath: ENGINE.replace(/^unix:\/\//, ''), path: `/containers/json?filters=${filters}` }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body)) : reject(new Error(`engine: HTTP ${res.statusCode}: ${body}`))));
    });
    req.on('error', reject);
  });
}

describe('engine backend: images are the engine\'s', { skip }, () => {
  let sc;
  before(async () => { sc = await connectSandcastle({ args: ['--pool-size', '1'] }); });
  after(async () => { await sc?.close(); });

  test('save_sandbox makes an engine image that list_images shows and create_sandbox starts from', async () => {
    const { sandbox_id: id } = await sc.create({ language: 'python' });
    await sc.ok('execute_code', { sandbox_id: id, code: 'open("model.txt", "w").write("weights")' });
    const saved = await sc.ok('save_sandbox', { sandbox_id: id, name: 'e2e-saved:1' });
    assert.equal(saved.image.name, 'e2e-saved:1');
    assert.match(saved.image.id, /\S/);
    assert.ok(saved.layer_bytes > 0);
    const { images } = await sc.ok('list_images');
    const mine = images.find((i) => i.name.endsWith('e2e-saved:1'));
    assert.ok(mine, `list_images shows the saved image: ${JSON.stringify(images.map((i) => i.name))}`);
    assert.equal(mine.source, 'engine');
    assert.ok(!images.some((i) => i.name.startsWith('sandcastle/host-base')), 'the base image is sandcastle\'s own, not listed');
    const again = await sc.create({ language: 'python', image: 'e2e-saved:1' });
    const r = await sc.ok('execute_code', { sandbox_id: again.sandbox_id, code: 'print(open("model.txt").read())' });
    assert.equal(r.stdout, 'weights\n');
    await sc.ok('close_sandbox', { sandbox_id: again.sandbox_id });
    await sc.ok('close_sandbox', { sandbox_id: id });
  });

  test('pause_sandbox freeze is the engine\'s pause: a kernel\'s variables survive it', async () => {
    const { sandbox_id: id } = await sc.create({ language: 'python' });
    await sc.ok('execute_code', { sandbox_id: id, code: 'kept = 41' });
    const paused = await sc.ok('pause_sandbox', { sandbox_id: id, mode: 'freeze' });
    assert.deepEqual(paused, {
      sandbox_id: id,
      status: 'paused',
      mode: 'freeze',
      memory_saved: true,
      note: 'frozen in memory: the sandbox keeps its memory while paused, and a server restart loses it (the files stay)',
    });
    // The engine itself holds the container paused (no other suite pauses).
    assert.equal((await pausedContainers()).length, 1, 'one paused sandcastle container on the engine');
    const { sandboxes } = await sc.ok('list_sandboxes');
    assert.equal(sandboxes.find((s) => s.sandbox_id === id)?.status, 'paused');
    const refused = await sc.err('execute_code', { sandbox_id: id, code: 'kept' });
    assert.equal(refused.text, `sandbox '${id}' is paused: call resume_sandbox first [failed_precondition]`);
    await sc.ok('resume_sandbox', { sandbox_id: id });
    assert.equal((await pausedContainers()).length, 0, 'resumed on the engine too');
    const r = await sc.ok('execute_code', { sandbox_id: id, code: 'kept + 1' });
    assert.match(JSON.stringify(r), /42/);
    await sc.ok('close_sandbox', { sandbox_id: id });
  });

  test('an image the engine lacks is an error that says where to get it', async () => {
    const r = await sc.err('create_sandbox', { image: 'no-such-registry.invalid/nothing:1' });
    assert.match(r.text, /not on engine unix:\/\/.*pull or load it there first/);
  });
});
