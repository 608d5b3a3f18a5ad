// A WebSocket operator client for the gateway (protocol v4), as `openclaw
// agent` and `openclaw nodes invoke` connect on the wire: client `cli`, role
// operator, scope operator.write, the shared token, no device identity
// (accepted on loopback). Node 22+ (global WebSocket).
//
//   node operator.mjs invoke NODE N [COMMAND PARAMS_JSON]
//                                        N× node.invoke (system.which {bins:[sh]} unless
//                                        given) → p50/p90/p99 ms (JSON)
//   node operator.mjs agent MESSAGE      one agent turn → {connectMs, totalMs, text}
const url = process.env.OPENCLAW_GATEWAY_URL ?? "ws://127.0.0.1:18789";
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const [mode, arg, count, command, paramsJson] = process.argv.slice(2);
const started = performance.now();
const ws = new WebSocket(url);
let seq = 0;
const waiting = new Map();
const request = (method, params, onRes) => {
  const id = `${++seq}:${crypto.randomUUID()}`;
  waiting.set(id, onRes);
  ws.send(JSON.stringify({ type: "req", id, method, params }));
  return id;
};
const call = (method, params) => new Promise((resolve) => request(method, params, resolve));
ws.onmessage = (m) => {
  const f = JSON.parse(m.data);
  if (f.type === "event" && f.event === "connect.challenge") {
    request("connect", {
      minProtocol: 3, maxProtocol: 4,
      client: { id: "cli", displayName: "bench", version: "bench", platform: "linux", mode: "cli", instanceId: crypto.randomUUID() },
      caps: [], role: "operator", scopes: ["operator.write"], auth: { token },
    }, (res) => (res.ok ? run(performance.now() - started) : fail(res)));
  } else if (f.type === "res" && waiting.has(f.id)) {
    const cb = waiting.get(f.id);
    if (!(f.ok && f.payload?.status === "accepted")) waiting.delete(f.id);
    if (!(f.ok && f.payload?.status === "accepted")) cb(f);
  }
};
ws.onerror = (e) => fail({ error: String(e.message ?? e) });
function fail(res) { console.error(JSON.stringify(res.error ?? res)); process.exit(1); }
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
async function run(connectMs) {
  if (mode === "invoke") {
    const times = [];
    for (let i = 0; i < Number(count ?? 1000); i++) {
      const t = performance.now();
      const res = await call("node.invoke", {
        nodeId: arg, command: command ?? "system.which",
        params: paramsJson ? JSON.parse(paramsJson) : { bins: ["sh"] },
        idempotencyKey: crypto.randomUUID(), timeoutMs: 15000,
      });
      if (!res.ok || res.payload?.payload?.isError) fail(res);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    console.log(JSON.stringify({ connectMs, n: times.length, p50: pct(times, 50), p90: pct(times, 90), p99: pct(times, 99) }));
  } else {
    const res = await call("agent", { message: arg, agentId: "main", sessionKey: `agent:main:bench-${crypto.randomUUID()}`, deliver: false, timeout: 120, idempotencyKey: crypto.randomUUID() });
    if (!res.ok) fail(res);
    const text = res.payload?.result?.payloads?.map((p) => p.text).join("\n");
    console.log(JSON.stringify({ connectMs, totalMs: performance.now() - started, durationMs: res.payload?.result?.meta?.durationMs, text }));
  }
  ws.close();
  process.exit(0);
}
