// The browser on a node, timed from one operator WebSocket through the
// gateway's `browser.request … target:"node"` (what the agent's `browser`
// tool and `openclaw gateway call browser.request` send). The caller holds
// operator.admin, which OpenClaw requires to route the browser to a node.
// Node 22+ (global WebSocket). Prints JSON; asserts nothing.
//
//   node browser.mjs first NODE URL   waits for a line on stdin ("go", sent
//                                     right after the node host was started),
//                                     then retries /tabs/open URL until the
//                                     node answers, then one ai /snapshot →
//                                     {openMs, snapshotMs, totalMs, tries}
//   node browser.mjs loop NODE N      N× (ai /snapshot, find the ref of the
//                                     button "Change text", /act click it) →
//                                     p50/p90/p99 of the pair and of each half
const url = process.env.OPENCLAW_GATEWAY_URL ?? "ws://127.0.0.1:18789";
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const [mode, node, arg] = process.argv.slice(2);
const ws = new WebSocket(url);
let seq = 0;
const waiting = new Map();
const call = (method, params) =>
  new Promise((resolve) => {
    const id = `${++seq}:${crypto.randomUUID()}`;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ type: "req", id, method, params }));
  });
const browser = (method, path, { query, body } = {}) =>
  call("browser.request", { method, path, query, body, target: "node", node, timeoutMs: 30000 });
ws.onmessage = async (m) => {
  const f = JSON.parse(m.data);
  if (f.type === "event" && f.event === "connect.challenge") {
    const res = await call("connect", {
      minProtocol: 3, maxProtocol: 4,
      client: { id: "cli", displayName: "bench-browser", version: "bench", platform: "linux", mode: "cli", instanceId: crypto.randomUUID() },
      caps: [], role: "operator", scopes: ["operator.admin", "operator.write", "operator.read"], auth: { token },
    });
    if (!res.ok) fail(res);
    (mode === "first" ? first : loop)().then(() => { ws.close(); process.exit(0); }, (e) => fail({ error: String(e) }));
  } else if (f.type === "res" && waiting.has(f.id)) {
    if (f.ok && f.payload?.status === "accepted") return;
    const resolve = waiting.get(f.id);
    waiting.delete(f.id);
    resolve(f);
  }
};
ws.onerror = (e) => fail({ error: String(e.message ?? e) });
function fail(res) { console.error(JSON.stringify(res.error ?? res)); process.exit(1); }
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => ({ p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99) });

function refOf(snapshot, needle) {
  const line = snapshot.split("\n").find((l) => l.includes(needle));
  const ref = line?.match(/\[ref=([^\]]+)\]/)?.[1];
  if (!ref) throw new Error(`no ref for ${needle} in:\n${snapshot}`);
  return ref;
}

async function snapshot() {
  const res = await browser("GET", "/snapshot", { query: { format: "ai" } });
  if (!res.ok) fail(res);
  return res.payload.snapshot;
}

async function first() {
  const go = await new Promise((resolve) => process.stdin.once("data", resolve));
  if (!String(go).startsWith("go")) fail({ error: "no go" });
  const t0 = performance.now();
  let tries = 0;
  for (;;) {
    tries++;
    const res = await browser("POST", "/tabs/open", { body: { url: arg } });
    if (res.ok) break;
    if (performance.now() - t0 > 120000) fail(res);
    await new Promise((r) => setTimeout(r, 50));
  }
  const opened = performance.now();
  const text = await snapshot();
  refOf(text, 'button "Change text"');
  const done = performance.now();
  console.log(JSON.stringify({ openMs: opened - t0, snapshotMs: done - opened, totalMs: done - t0, tries }));
}

async function loop() {
  const snaps = [], clicks = [], pairs = [];
  for (let i = 0; i < Number(arg ?? 50); i++) {
    const t = performance.now();
    const ref = refOf(await snapshot(), 'button "Change text"');
    const s = performance.now();
    const res = await browser("POST", "/act", { body: { kind: "click", ref } });
    if (!res.ok || res.payload?.ok !== true) fail(res);
    const c = performance.now();
    snaps.push(s - t); clicks.push(c - s); pairs.push(c - t);
  }
  console.log(JSON.stringify({ n: pairs.length, pair: stats(pairs), snapshot: stats(snaps), click: stats(clicks) }));
}
