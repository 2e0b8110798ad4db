// A registry that misbehaves on purpose (tests only), serving the image
// `ref` of an OCI layout. Usage: node fake_registry.mjs LAYOUT REF MODE
//   corrupt        a layer's bytes differ from its digest (same length)
//   redirect       bearer auth required; blobs redirect to localhost:PORT/store/,
//                  which answers 403 when an Authorization header reaches it
//   redirect-loop  blobs redirect to themselves forever
//   bigmanifest    a 5 MiB manifest
//   schema1        a Docker schema 1 manifest
//   stall          a layer's headers and half its body, then silence
// Prints "listening PORT".
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [layout, ref, mode] = process.argv.slice(2);
const blob = (d) => readFileSync(join(layout, "blobs", "sha256", d.replace("sha256:", "")));
const index = JSON.parse(readFileSync(join(layout, "index.json")));
const desc = index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === ref);
let manifest = blob(desc.digest);
const layers = new Set(JSON.parse(manifest).layers.map((l) => l.digest));
if (mode === "bigmanifest") {
  const m = JSON.parse(manifest);
  m.annotations = { pad: "x".repeat(5 << 20) };
  manifest = Buffer.from(JSON.stringify(m));
}
const TOKEN = "T0KEN";
let port = 0;

const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  const p = url.pathname;
  if (p === "/token") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ token: TOKEN }));
  if (p.startsWith("/store/")) {
    if (req.headers.authorization) return res.writeHead(403).end("credentials leaked to the blob store");
    return res.writeHead(200).end(blob(p.slice(7)));
  }
  if (mode === "redirect" && req.headers.authorization !== `Bearer ${TOKEN}`) {
    res.writeHead(401, { "www-authenticate": `Bearer realm="http://127.0.0.1:${port}/token",service="fake"`,
                         "content-type": "application/json" });
    return res.end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED", message: "authentication required" }] }));
  }
  if (p === "/v2/") return res.writeHead(200).end("{}");
  let m;
  if ((m = p.match(/^\/v2\/.+\/manifests\/(.+)$/))) {
    if (mode === "schema1") {
      res.writeHead(200, { "content-type": "application/vnd.docker.distribution.manifest.v1+prettyjws" });
      return res.end(JSON.stringify({ schemaVersion: 1, name: "test/img", tag: "v1", fsLayers: [], history: [] }));
    }
    res.writeHead(200, { "content-type": "application/vnd.oci.image.manifest.v1+json" });
    return res.end(manifest);
  }
  if ((m = p.match(/^\/v2\/.+\/blobs\/(sha256:[0-9a-f]{64})$/))) {
    const digest = m[1];
    if (!layers.has(digest)) return res.writeHead(200).end(blob(digest));
    if (mode === "redirect") return res.writeHead(307, { location: `http://localhost:${port}/store/${digest}` }).end();
    if (mode === "redirect-loop") return res.writeHead(302, { location: `${p}?n=${Math.random()}` }).end();
    const data = Buffer.from(blob(digest));
    if (mode === "corrupt") {
      data[data.length - 1] ^= 0xff;
      return res.writeHead(200).end(data);
    }
    if (mode === "stall") {
      res.writeHead(200, { "content-length": data.length });
      return res.write(data.subarray(0, data.length >> 1));
    }
    return res.writeHead(200).end(data);
  }
  res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ code: "NOT_FOUND" }] }));
});
server.listen(0, "127.0.0.1", () => {
  port = server.address().port;
  console.log(`listening ${port}`);
});
