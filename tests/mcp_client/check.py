"""Drives `clawbot_router mcp` with the official Python MCP client (the
`mcp` package from PyPI, written by the protocol's authors, not by us):
initialize, list tools, call, progress, cancel (the process tree must be
gone), concurrency, prompts, and malformed calls. Run by tests/mcp_client.rs;
exits non-zero with a FAIL line per failed check.

Usage: python check.py ROUTER FAKE_OPENCLAW REPO_DIR
"""

import importlib.metadata
import json
import os
import shlex
import sys
import tempfile
import time

import anyio

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

ROUTER, FAKE, REPO = sys.argv[1], sys.argv[2], sys.argv[3]
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


async def session_for(params, body):
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                await body(session, init)


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


async def main():
    print("mcp", importlib.metadata.version("mcp"), flush=True)
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
