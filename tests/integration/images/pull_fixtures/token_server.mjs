// A token server for docker-registry's `auth: token` (tests only): signs
// RS256 JWTs with key.pem, the certificate in the x5c header (the registry
// trusts it through rootcertbundle). User alice:secret gets what she asks
// for; anonymous callers get pull on public/* and nothing else.
// Usage: node token_server.mjs KEY CERT ISSUER. Prints "listening PORT".
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createSign, X509Certificate, randomUUID } from "node:crypto";

const [key, cert, issuer] = [readFileSync(process.argv[2]), readFileSync(process.argv[3]), process.argv[4]];
const x5c = [new X509Certificate(cert).raw.toString("base64")];
const b64url = (b) => Buffer.from(b).toString("base64url");

function sign(claims) {
  const head = b64url(JSON.stringify({ alg: "RS256", typ: "JWT", x5c }));
  const body = b64url(JSON.stringify(claims));
  const s = createSign("RSA-SHA256");
  s.update(`${head}.${body}`);
  return `${head}.${body}.${s.sign(key).toString("base64url")}`;
}

const server = createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  if (url.pathname !== "/token") return res.writeHead(404).end();
  let user = "";
  const auth = req.headers.authorization || "";
  if (auth.startsWith("Basic ")) {
    const [u, p] = Buffer.from(auth.slice(6), "base64").toString().split(":");
    if (u !== "alice" || p !== "secret") {
      res.writeHead(401, { "content-type": "application/json" });
      return res.end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED", message: "bad credentials" }] }));
    }
    user = u;
  }
  const access = [];
  for (const scope of url.searchParams.getAll("scope")) {
    const [type, name, actions] = scope.split(":");
    if (type !== "repository") continue;
    const granted = actions.split(",").filter((a) => user || (a === "pull" && name.startsWith("public/")));
    access.push({ type, name, actions: granted });
  }
  const now = Math.floor(Date.now() / 1000);
  const token = sign({ iss: issuer, sub: user, aud: url.searchParams.get("service"), exp: now + 300,
                       nbf: now - 10, iat: now, jti: randomUUID(), access });
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ token, access_token: token, expires_in: 300 }));
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
