// Drives `clawbot_router mcp --http` with the official TypeScript MCP
// client (@modelcontextprotocol/sdk from npm, its Streamable HTTP
// transport): initialize, list tools, a call, progress notifications, and
// a cancelled call whose process tree must be gone. Run by
// tests/mcp_client.rs; exits non-zero with a FAIL line per failed check.
//
// Usage: node check_http.mjs SDK_DIR ROUTER FAKE_OPENCLAW

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, ROUTER, FAKE] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(join(sdkDir, "dist/esm/client/index.js")));
const { StreamableHTTPClientTransport } = await import(
  pathToFileURL(join(sdkDir, "dist/esm/client/streamableHttp.js"))
);
const version = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8")).version;
console.log(`@modelcontextprotocol/sdk ${version}`);

const failed = [];
function check(cond, what) {
  console.log((cond ? "OK   " : "FAIL ") + what);
  if (!cond) failed.push(what);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.split(") ")[1].split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

async function freePort() {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = s.address().port;
      s.close(() => resolve(port));
    });
  });
}

async function started(port) {
  for (let i = 0; i < 400; i++) {
    const ok = await new Promise((resolve) => {
      const c = createConnection({ port, host: "127.0.0.1" }, () => {
        c.end();
        resolve(true);
      });
      c.on("error", () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error("mcp --http did not start");
}

// `mcp --http` with the fake openclaw in `scenario`.
async function withServer(scenario, body) {
  const port = await freePort();
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("OPENCLAW_") && !k.startsWith("CLAWBOT_ROUTER_")),
  );
  env.OPENCLAW_BIN = [FAKE, ...scenario].map((w) => `'${w}'`).join(" ");
  const child = spawn(ROUTER, ["mcp", "--lang", "en", "--grace", "0.5", "--http", `127.0.0.1:${port}`], {
    env,
    stdio: ["ignore", "ignore", "ignore"],
  });
  try {
    await started(port);
    const client = new Client({ name: "check_http", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
    await client.connect(transport);
    try {
      await body(client, transport);
    } finally {
      let ended = true;
      await transport.terminateSession().catch(() => (ended = false));
      check(ended, "DELETE ends the session (terminateSession)");
      await client.close();
    }
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => (child.exitCode !== null ? r() : child.on("exit", r)));
  }
}

await withServer(["--scenario", "reply"], async (client, transport) => {
  check(client.getServerVersion()?.name === "clawbot_router", "server name");
  check(typeof transport.sessionId === "string" && transport.sessionId.length > 0, "a session id (Mcp-Session-Id)");
  const { tools } = await client.listTools();
  check(tools.length === 1 && tools[0].name === "clawbot_router", "one tool, clawbot_router");
  const r = await client.callTool({ name: "clawbot_router", arguments: { agent: "main", message: "hello from typescript" } });
  check(r.isError === false, "call succeeds");
  check(
    JSON.stringify(r.structuredContent) ===
      JSON.stringify({ content: "ECHO: hello from typescript\n", directTTS: false, interruptMode: 2 }),
    `structured result ${JSON.stringify(r.structuredContent)}`,
  );
});

await withServer(["--scenario", "sleep", "--sleep", "2.5"], async (client) => {
  const seen = [];
  const r = await client.callTool({ name: "clawbot_router", arguments: { message: "slow" } }, undefined, {
    onprogress: (p) => seen.push(p),
  });
  check(r.structuredContent?.content === "thinking...\nECHO: slow\n", "slow call answers");
  check(seen.length >= 2, `progress notifications over SSE: ${seen.length}`);
  check(seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress), "progress increases");
});

const dir = mkdtempSync(join(tmpdir(), "check-http-"));
const pidFile = join(dir, "pids");
await withServer(["--scenario", "grandchild", "--pid-file", pidFile], async (client) => {
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 1500);
  let aborted = false;
  try {
    await client.callTool({ name: "clawbot_router", arguments: { message: "hang" } }, undefined, {
      signal: abort.signal,
    });
  } catch {
    aborted = true;
  }
  check(aborted, "the client gave up on the call (AbortSignal)");
  let pids = [];
  for (let i = 0; i < 100; i++) {
    try {
      pids = readFileSync(pidFile, "utf8").split(/\s+/).filter(Boolean).map(Number);
    } catch {}
    if (pids.length >= 2 && !pids.some(alive)) break;
    await sleep(50);
  }
  check(pids.length >= 2 && !pids.some(alive), `the cancelled call's tree is gone: ${pids}`);
  await client.ping();
  check(true, "the server answers on after a cancel");
});

if (failed.length) {
  console.log(`${failed.length} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");
