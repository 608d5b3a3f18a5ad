// The gateway's desktop viewer, as its Control UI is one, for the
// end-to-end suite (Node 22+: global WebSocket): an operator (client cli,
// scope operator.admin, the shared token; loopback) asks `desktop.observe`
// for a node's desktop, then — on that same connection still open, as the
// gateway binds the viewer's token to it — opens the viewer socket and
// speaks RFB as a viewer does: version, security None (the gateway has
// authenticated upstream already), ClientInit, ServerInit, then one full
// framebuffer update request, counting the bytes that come back.
//
//   node desktop-viewer.mjs NODE_DISPLAY_NAME [PASSWORD]
// prints one JSON line: {"width", "height", "name", "bytes", "frames",
// "biggestFrame"} or {"error"}.
const url = process.env.OPENCLAW_GATEWAY_URL ?? "ws://127.0.0.1:18789";
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const [nodeName, password] = process.argv.slice(2);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const fail = (why) => { say({ error: typeof why === "string" ? why : JSON.stringify(why) }); process.exit(1); };
setTimeout(() => fail("no answer within 60 s"), 60_000);
const ws = new WebSocket(url);
let seq = 0;
const waiting = new Map();
const request = (method, params) => new Promise((resolve) => {
  const id = `${++seq}:${crypto.randomUUID()}`;
  waiting.set(id, resolve);
  ws.send(JSON.stringify({ type: "req", id, method, params }));
});
ws.onerror = (e) => fail(String(e.message ?? e));
ws.onmessage = async (m) => {
  const f = JSON.parse(m.data);
  if (f.type === "event" && f.event === "connect.challenge") {
    const res = await request("connect", {
      minProtocol: 3, maxProtocol: 4,
      client: { id: "cli", displayName: "e2e-desktop-viewer", version: "e2e", platform: "linux", mode: "cli", instanceId: crypto.randomUUID() },
      role: "operator", scopes: ["operator.admin"], auth: { token },
    });
    if (!res.ok) fail(res.error);
    observe().catch((e) => fail(String(e?.stack ?? e)));
  } else if (f.type === "res" && waiting.has(f.id)) {
    const cb = waiting.get(f.id);
    waiting.delete(f.id);
    cb(f);
  }
};

async function observe() {
  const listed = await request("node.list", {});
  if (!listed.ok) fail(listed.error);
  const node = (listed.payload?.nodes ?? []).find((n) => n.displayName === nodeName && n.connected !== false);
  if (!node) fail(`no connected node ${nodeName}: ${JSON.stringify(listed.payload)}`);
  const params = { source: { kind: "node", nodeId: node.nodeId } };
  if (password) params.credentials = { password };
  const observed = await request("desktop.observe", params);
  if (!observed.ok) fail(observed.error);
  await view(new URL(observed.payload.wsPath, url).toString());
}

async function view(viewerUrl) {
  const viewer = new WebSocket(viewerUrl);
  viewer.binaryType = "arraybuffer";
  let buffered = Buffer.alloc(0);
  let frames = 0, biggestFrame = 0, total = 0;
  let wake = () => {};
  viewer.onmessage = (m) => {
    const chunk = Buffer.from(m.data);
    frames += 1; total += chunk.length;
    biggestFrame = Math.max(biggestFrame, chunk.length);
    buffered = Buffer.concat([buffered, chunk]);
    wake();
  };
  viewer.onclose = (e) => fail(`viewer closed: ${e.code} ${e.reason}`);
  viewer.onerror = (e) => fail(`viewer: ${String(e.message ?? e)}`);
  await new Promise((resolve) => { viewer.onopen = resolve; });
  const read = async (n) => {
    while (buffered.length < n) await new Promise((resolve) => { wake = resolve; });
    const out = buffered.subarray(0, n);
    buffered = buffered.subarray(n);
    return out;
  };
  const version = await read(12);
  if (version.toString("ascii") !== "RFB 003.008\n") fail(`version ${JSON.stringify(version.toString("ascii"))}`);
  viewer.send(version);
  const count = (await read(1))[0];
  const types = [...(await read(count))];
  if (!types.includes(1)) fail(`security types ${types}`);
  viewer.send(Buffer.from([1]));
  const result = (await read(4)).readUInt32BE(0);
  if (result !== 0) fail(`security result ${result}`);
  viewer.send(Buffer.from([1])); // ClientInit: shared
  const init = await read(24);
  const width = init.readUInt16BE(0), height = init.readUInt16BE(2);
  const bitsPerPixel = init[4];
  const name = (await read(init.readUInt32BE(20))).toString("utf8");
  // One full, non-incremental update in the server's own pixel format
  // (no SetEncodings: Raw), read to its last byte.
  const request = Buffer.alloc(10);
  request[0] = 3; request[1] = 0;
  request.writeUInt16BE(0, 2); request.writeUInt16BE(0, 4);
  request.writeUInt16BE(width, 6); request.writeUInt16BE(height, 8);
  viewer.send(request);
  const header = await read(4);
  if (header[0] !== 0) fail(`message type ${header[0]}`);
  let pixels = 0;
  for (let r = header.readUInt16BE(2); r > 0; r--) {
    const rect = await read(12);
    const w = rect.readUInt16BE(4), h = rect.readUInt16BE(6), encoding = rect.readInt32BE(8);
    if (encoding !== 0) fail(`encoding ${encoding}`);
    await read(w * h * (bitsPerPixel / 8));
    pixels += w * h;
  }
  viewer.onclose = null;
  viewer.close();
  say({ width, height, name, pixels, bytes: total, frames, biggestFrame });
  setTimeout(() => { ws.close(); process.exit(0); }, 200);
}
