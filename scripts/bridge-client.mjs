// A bridge client — the coding-agent side of seed 004 — for trying
// `clawbot_router bridge` by hand (README "Bridge server …"). Node 22+
// (global WebSocket): the sandbox's Node 24 is on PATH after
// `eval "$(scripts/sandbox.sh env)"`.
//
//   node scripts/bridge-client.mjs SESSION [TOOL ARGS_JSON]...
//
// Connects to CLAWBOT_BRIDGE_URL (default ws://127.0.0.1:18801/bridge, the
// bridge's default address), says hello with CLAWBOT_BRIDGE_TOKEN, then
// calls each TOOL with its arguments, one after the other. Prints one JSON
// line per frame worth seeing: the hello_ack (its tools by name), each
// inbound_message (what `clawbot_router bridge send` kept for the session)
// and each tool_result. Answers the bridge's pings; closes once every call
// is answered. Exits 1 when the bridge closes first or nothing comes for 30 s.
const url = process.env.CLAWBOT_BRIDGE_URL ?? "ws://127.0.0.1:18801/bridge";
const token = process.env.CLAWBOT_BRIDGE_TOKEN;
const [session, ...pairs] = process.argv.slice(2);
if (!session || !token || pairs.length % 2 !== 0) {
  console.error("usage: CLAWBOT_BRIDGE_TOKEN=… node bridge-client.mjs SESSION [TOOL ARGS_JSON]...");
  process.exit(2);
}
const calls = [];
for (let i = 0; i < pairs.length; i += 2) {
  calls.push({ tool: pairs[i], args: JSON.parse(pairs[i + 1]) });
}
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const fail = (why) => { console.error(`bridge-client: ${why}`); process.exit(1); };
let quiet = setTimeout(() => fail("nothing from the bridge for 30 s"), 30_000);
let next = 0;
let done = false;
const ws = new WebSocket(url);
const send = (frame) => ws.send(JSON.stringify(frame));
// The next call, or the end once every call is answered.
const call = () => {
  if (next === calls.length) { done = true; ws.close(1000); return; }
  const { tool, args } = calls[next++];
  send({ type: "tool_call", call_id: `try_${next}`, tool, args });
};
ws.onopen = () => send({ type: "hello", openclaw_session: session, claude_session: "bridge-client", pid: process.pid, token });
ws.onerror = (e) => fail(`${url}: ${e.message ?? "cannot connect"}`);
ws.onmessage = (m) => {
  clearTimeout(quiet);
  quiet = setTimeout(() => fail("nothing from the bridge for 30 s"), 30_000);
  const frame = JSON.parse(m.data);
  switch (frame.type) {
    case "hello_ack":
      say({ type: "hello_ack", tools: frame.tools.map((t) => t.name), session_meta: frame.session_meta });
      call();
      break;
    case "ping":
      send({ type: "pong", ts: frame.ts });
      break;
    case "tool_result":
      say(frame);
      call();
      break;
    default:
      say(frame);
  }
};
ws.onclose = (e) => {
  if (done) process.exit(0);
  fail(`the bridge closed the connection (${e.code}${e.reason ? `: ${e.reason}` : ""})`);
};
