"""Drives `clawbot_router mcp` with the official Python MCP client (the
`mcp` package from PyPI, written by the protocol's authors, not by us):
initialize, list tools, call, progress, cancel (the process tree must be
gone), concurrency, prompts, and malformed calls — over stdio, or with
--http over the Streamable HTTP transport (`mcp --http`), where the HTTP
rules are checked too: the bearer token, Origin and Host (DNS rebinding),
the body limit, the endpoint, and DELETE ending a session. Run by
tests/mcp_client.rs; exits non-zero with a FAIL line per failed check.

Usage: python check.py ROUTER FAKE_OPENCLAW REPO_DIR [--http]
"""

import importlib.metadata
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import anyio

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROUTER, FAKE, REPO = sys.argv[1], sys.argv[2], sys.argv[3]
HTTP = "--http" in sys.argv[4:]
FAILED = []


def check(cond, what):
    print(("OK   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)


def server(*scenario, extra=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "CLAWBOT_ROUTER_"))}
    env["OPENCLAW_BIN"] = shlex.join([FAKE, *scenario])
    return StdioServerParameters(command=ROUTER, args=["mcp", "--lang", "en", "--grace", "0.5", *extra], env=env)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_server(params, extra_env=None):
    """`mcp --http` on a port of its own; (process, base URL)."""
    port = free_port()
    env = dict(params.env, **(extra_env or {}))
    proc = subprocess.Popen([params.command, *params.args, "--http", f"127.0.0.1:{port}"], env=env,
                            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("mcp --http did not start")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "mcp --http stops on SIGTERM")


async def session_for(params, body):
    if HTTP:
        proc, base = http_server(params)
        try:
            async with streamable_http_client(base + "/mcp") as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    init = await session.initialize()
                    await body(session, init)
        finally:
            stop(proc)
        return
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                await body(session, init)


def post(url, body, headers=()):
    """A raw POST; (status, headers, text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **dict(headers)})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def http_rules():
    """What sits in front of the SDK's transport, checked on the wire."""
    params = server("--scenario", "reply")
    proc, base = http_server(params)
    try:
        status, headers, _ = post(base + "/mcp", INITIALIZE)
        check(status == 200 and headers.get("Mcp-Session-Id"), f"initialize over HTTP: {status}")
        session = headers.get("Mcp-Session-Id")
        status, _, _ = post(base + "/mcp", INITIALIZE, {"Origin": "http://evil.example"})
        check(status == 403, f"a browser Origin is refused: {status}")
        status, _, _ = post(base + "/mcp", INITIALIZE, {"Host": "evil.example"})
        check(status in (403, 421), f"a foreign Host (DNS rebinding) is refused: {status}")
        status, _, _ = post(base + "/other", INITIALIZE)
        check(status == 404, f"only /mcp: {status}")
        status, _, _ = post(base + "/mcp", b"{" + b" " * (17 << 20) + b"}")
        check(status == 413, f"a body over the limit is refused: {status}")
        request = urllib.request.Request(base + "/mcp", method="DELETE", headers={"Mcp-Session-Id": session})
        with urllib.request.urlopen(request, timeout=10) as r:
            check(r.status == 200, f"DELETE ends the session: {r.status}")
        status, _, _ = post(base + "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                            {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
        check(status == 404, f"an ended session is gone: {status}")
    finally:
        stop(proc)
    # With a token: nothing without it.
    proc, base = http_server(params, {"CLAWBOT_ROUTER_MCP_TOKEN": "http-test-token-42"})
    try:
        status, headers, _ = post(base + "/mcp", INITIALIZE)
        check(status == 401 and headers.get("WWW-Authenticate") == "Bearer", f"no token: {status}")
        status, _, _ = post(base + "/mcp", INITIALIZE, {"Authorization": "Bearer wrong"})
        check(status == 401, f"a wrong token: {status}")
        status, _, _ = post(base + "/mcp", INITIALIZE, {"Authorization": "Bearer http-test-token-42"})
        check(status == 200, f"the token: {status}")
    finally:
        stop(proc)


async def basics(session, init):
    check(init.server_info.name == "clawbot_router", f"server name {init.server_info.name}")
    check(init.capabilities.tools is not None and init.capabilities.prompts is not None, "tools and prompts advertised")
    tools = (await session.list_tools()).tools
    with open(os.path.join(REPO, "tool-schemas", "mcp.json")) as f:
        committed = json.load(f)
    check(len(tools) == 1 and tools[0].name == "clawbot_router", "one tool, clawbot_router")
    check(tools[0].input_schema == committed["inputSchema"], "inputSchema is tool-schemas/mcp.json's")
    check(tools[0].description == committed["description"], "description is tool-schemas/mcp.json's")

    r = await session.call_tool("clawbot_router", {"agent": "main", "message": "hello from python"})
    check(r.is_error is False, "call succeeds")
    check(r.structured_content == {"content": "ECHO: hello from python\n", "directTTS": False, "interruptMode": 2},
          f"structured result {r.structured_content}")
    check(json.loads(r.content[0].text) == r.structured_content, "text block is the same JSON")

    r = await session.call_tool("clawbot_router", {"message": ""})
    check(r.is_error is True and "must not be empty" in r.structured_content["content"], "empty message is an error result")
    r = await session.call_tool("clawbot_router", {"message": ["not", "text"]})
    check(r.is_error is True and "Invalid arguments" in r.structured_content["content"], "wrong type is an error result")
    try:
        await session.call_tool("not_our_tool", {"message": "x"})
        check(False, "an unknown tool is refused")
    except MCPError as e:
        check(e.error.code == -32602, f"unknown tool -> {e.error.code} {e.error.message}")

    prompts = (await session.list_prompts()).prompts
    check([p.name for p in prompts] == ["clawbot_router"], "one prompt")
    got = await session.get_prompt("clawbot_router", {"lang": "en"})
    with open(os.path.join(REPO, "prompts", "clawbot_router.en.md")) as f:
        check(got.messages[0].content.text == f.read(), "the prompt is prompts/clawbot_router.en.md")
    try:
        await session.get_prompt("clawbot_router", {"lang": "fr"})
        check(False, "lang=fr is refused")
    except MCPError as e:
        check(e.error.code == -32602, f"lang=fr -> {e.error.code}")


async def slow(session, init):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    r = await session.call_tool("clawbot_router", {"message": "slow"}, progress_callback=on_progress)
    check(r.structured_content["content"] == "thinking...\nECHO: slow\n", "slow call answers")
    check(len(seen) >= 2, f"progress notifications: {len(seen)}")
    check(all(t == 60.0 for _, t, _ in seen), "progress total is the timeout")
    check(all(a < b for (a, _, _), (b, _, _) in zip(seen, seen[1:])), "progress increases")

    started = time.monotonic()
    results = []

    async def one(i):
        results.append(await session.call_tool("clawbot_router", {"message": f"call {i}"}))

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, i)
    took = time.monotonic() - started
    check(len(results) == 3 and all(not r.is_error for r in results), "three concurrent calls answer")
    check(took < 5.0, f"three 2.5 s calls overlap ({took:.1f} s)")


async def stopped_mid_call():
    """SIGTERM while a call runs: the call stops (its tree too) and still
    answers, before the server goes."""
    proc, base = http_server(server("--scenario", "sleep", "--sleep", "30"))
    try:
        async with streamable_http_client(base + "/mcp") as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()

                async def stop_soon():
                    await anyio.sleep(1.5)
                    proc.terminate()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(stop_soon)
                    started = time.monotonic()
                    r = await session.call_tool("clawbot_router", {"message": "slow"})
                check(r.is_error is True and "the server stopping" in r.structured_content["content"],
                      f"a call running at SIGTERM is stopped and answered: {r.structured_content}")
                check(time.monotonic() - started < 10, "... well before its 30 s")
        check(proc.wait(15) == 0, "the server then exits 0")
    finally:
        if proc.poll() is None:
            proc.kill()


async def main():
    print("mcp", importlib.metadata.version("mcp"), "over HTTP" if HTTP else "over stdio", flush=True)
    if HTTP:
        http_rules()
        await stopped_mid_call()
    await session_for(server("--scenario", "reply"), basics)
    await session_for(server("--scenario", "sleep", "--sleep", "2.5"), slow)

    with tempfile.TemporaryDirectory() as d:
        pid_file = os.path.join(d, "pids")

        async def cancel(session, init):
            with anyio.move_on_after(1.5) as scope:
                await session.call_tool("clawbot_router", {"message": "hang"})
            check(scope.cancelled_caught, "the client gave up on the call")
            deadline = time.monotonic() + 5
            pids = []
            while time.monotonic() < deadline:
                with open(pid_file) as f:
                    pids = [int(p) for p in f.read().split()]
                if pids and not any(alive(p) for p in pids):
                    break
                await anyio.sleep(0.05)
            check(len(pids) >= 2 and not any(alive(p) for p in pids), f"cancelled call's tree is gone: {pids}")
            await session.send_ping()
            check(True, "the server answers on after a cancel")

        await session_for(server("--scenario", "grandchild", "--pid-file", pid_file), cancel)

    # Against the real OpenClaw gateway when one is up (scripts/e2e.sh).
    url, token = os.environ.get("OPENCLAW_GATEWAY_URL"), os.environ.get("OPENCLAW_GATEWAY_TOKEN")
    if url and token:
        async def gateway(session, init):
            seen = []

            async def on_progress(progress, total, message):
                seen.append(message)

            r = await session.call_tool("clawbot_router", {"agent": "main", "message": "over mcp and the gateway"},
                                        progress_callback=on_progress)
            check(r.is_error is False, f"gateway call succeeds: {r.structured_content}")
            check(r.structured_content["content"] == "ECHO: over mcp and the gateway\n", "the real gateway's reply")

        await session_for(server("--scenario", "reply",
                                 extra=("--via", "gateway", "--gateway", url, "--token", token, "--timeout", "120")),
                          gateway)
    else:
        print("(no OPENCLAW_GATEWAY_URL/TOKEN: the gateway path is checked by scripts/e2e.sh)", flush=True)

    if FAILED:
        print(f"{len(FAILED)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed", flush=True)


anyio.run(main)
