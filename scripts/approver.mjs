// An operator that can approve, connected the way OpenClaw's Control UI is
// for exec approvals (client cli, caps exec-approvals, scopes operator.admin
// and operator.approvals, the shared token; loopback), which also starts
// one agent turn: OpenClaw registers an exec approval only for a caller
// that holds operator.approvals, and raises it only while an approver is
// connected. For the end-to-end suite (Node 22+: global WebSocket).
//
//   node approver.mjs MESSAGE [SESSION]
// prints one JSON line per `exec.approval.requested` ({"approval", "command"}),
// then {"text", "status"} when the turn ends; resolve approvals meanwhile with
// `openclaw approvals resolve <id> allow-once|allow-always|deny`.
const url = process.env.OPENCLAW_GATEWAY_URL ?? "ws://127.0.0.1:18789";
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const [message, session] = process.argv.slice(2);
const ws = new WebSocket(url);
let seq = 0;
const waiting = new Map();
const request = (method, params, onRes) => {
  const id = `${++seq}:${crypto.randomUUID()}`;
  waiting.set(id, onRes);
  ws.send(JSON.stringify({ type: "req", id, method, params }));
};
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const fail = (why) => { say({ error: why }); process.exit(1); };
setTimeout(() => fail("no answer within 240 s"), 240_000);
ws.onerror = (e) => fail(String(e.message ?? e));
ws.onmessage = (m) => {
  const f = JSON.parse(m.data);
  if (f.type === "event" && f.event === "connect.challenge") {
    request("connect", {
      minProtocol: 3, maxProtocol: 4,
      client: { id: "cli", displayName: "e2e-approver", version: "e2e", platform: "linux", mode: "cli", instanceId: crypto.randomUUID() },
      caps: ["exec-approvals"], role: "operator", scopes: ["operator.admin", "operator.approvals"], auth: { token },
    }, (res) => (res.ok ? start() : fail(res.error)));
  } else if (f.type === "event" && f.event === "exec.approval.requested") {
    say({ approval: f.payload?.id, command: f.payload?.request?.command });
  } else if (f.type === "res" && waiting.has(f.id)) {
    if (f.ok && f.payload?.status === "accepted") return;
    const cb = waiting.get(f.id);
    waiting.delete(f.id);
    cb(f);
  }
};
function start() {
  request("agent", {
    message, agentId: "main", sessionKey: session ?? `agent:main:e2e-approvals-${crypto.randomUUID()}`,
    deliver: false, timeout: 200, idempotencyKey: crypto.randomUUID(),
  }, (res) => {
    if (!res.ok) fail(res.error);
    const text = (res.payload?.result?.payloads ?? []).map((p) => p.text ?? "").join("\n");
    say({ text, status: res.payload?.status });
    ws.close();
    process.exit(0);
  });
}
