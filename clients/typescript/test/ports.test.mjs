// Ports through the SDK: a server in the sandbox (python3 of the debian
// image) reached with portFetch, shared, listed, revoked.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { skipReason, startDaemon, uniqueName, sleep } from "./harness.mjs";

const SERVER = `
import json
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        b = json.dumps({"path": self.path, "auth": self.headers.get("Authorization")}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
HTTPServer(("127.0.0.1", 8000), H).serve_forever()
`;

describe("ports", { skip: skipReason("debian") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("ports");

  before(async () => {
    daemon = await startDaemon({ image: "debian" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token(), timeoutSeconds: 120 });
    await sandboxes.writeFile(name, "server.py", SERVER);
    await sandboxes.spawn(name, { command: ["python3", "server.py"] });
    for (let i = 0; i < 100; i++) {
      const r = await sandboxes.ports(name).fetch(8000, "/");
      await r.arrayBuffer();
      if (r.status === 200) break;
      await sleep(100);
    }
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("portFetch reaches the server with the credential, which goes no further", async () => {
    const r = await sandboxes.portFetch(name, 8000, "/a/b?c=1", { headers: { authorization: "Bearer mine" } });
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { path: "/a/b?c=1", auth: null });
    const t = await sandboxes.portUrl(name, 8000, "x");
    assert.match(t.url, /\/v1\/sandboxes\/[^/]+\/ports\/8000\/x$/);
    assert.match(Object.values(t.headers)[0], /^Bearer sbxc1\./);
    await assert.rejects(() => sandboxes.portUrl(name, 0), SandboxRequestError);
    await assert.rejects(() => sandboxes.portUrl(name, 65536), SandboxRequestError);
  });

  it("share, use without a credential, list, unshare", async () => {
    const ports = sandboxes.ports(name);
    const s = await ports.share(8000, { ttl: "10m", public: true });
    assert.equal(s.port, 8000);
    assert.equal(s.public, true);
    assert.equal(s.url, s.pathUrl);
    const r = await fetch(`${s.url}hello`);
    assert.equal(r.status, 200);
    assert.equal((await r.json()).path, "/hello");
    assert.ok((await ports.shares()).some((x) => x.id === s.id));
    await ports.unshare(8000, s.id);
    assert.ok(!(await ports.shares()).some((x) => x.id === s.id));
    const gone = await fetch(`${s.url}hello`);
    assert.equal(gone.status, 404);
    await gone.arrayBuffer();
    await assert.rejects(() => ports.share(8000, { ttl: "forever" }), (e) => e instanceof SandboxRequestError && e.status === 400);
  });
});
