#!/usr/bin/env python3
"""Seeds the fuzz corpora (fuzz/corpus/TARGET/) from real traffic: the
recorded OpenClaw frames (tests/fixtures/frames), the seeds' own examples
(shared/seeds), and the shapes the tests send. Each file is named by the
SHA-1 of its bytes, as libFuzzer names what it adds, so seeding twice adds
nothing. Run it, then `cargo fuzz cmin TARGET` (scripts/fuzz.sh --cmin)
before committing."""

import base64
import glob
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    elif not isinstance(data, bytes):
        data = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def argv(*words):
    return "\0".join(words)


# The gateway: every distinct frame recorded off the real OpenClaw, and the
# parameters of every invoke it sent.
for path in sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/frames/*.jsonl"))):
    for line in open(path, encoding="utf-8"):
        frame = json.loads(line).get("frame")
        if not isinstance(frame, dict) or "type" not in frame:
            continue
        put("gateway_frame", frame)
        if frame.get("event") == "node.invoke.request":
            params = frame["payload"].get("paramsJSON")
            if params:
                put("invoke_params", params)
for params in [
    {"command": ["ls", "-la"], "cwd": "/tmp", "env": {"A": "1"}, "timeoutMs": 5000},
    {"command": ["sh", "-c", "echo hi"], "approved": True, "approvalDecision": "allow-once",
     "systemRunPlan": {"argv": ["sh", "-c", "echo hi"], "cwd": None, "commandText": "sh -c \"echo hi\""}},
    {"command": "echo hi | wc -c"},
    {"command": "ls", "args": ["-la", "/"], "cwd": "sub"},
    {"command": ["cmd.exe", "/d", "/s", "/c", "dir"], "rawCommand": "dir", "security": "allowlist", "ask": "on-miss"},
]:
    put("invoke_params", params)

# The bridge (seed 004).
for frame in [
    {"type": "hello", "openclaw_session": "s1", "claude_session": "c-uuid", "pid": 4242, "token": "t0k3n"},
    {"type": "tool_call", "call_id": "tc_001", "tool": "read_file", "args": {"path": "a"}},
    {"type": "tool_call", "call_id": "long", "tool": "run_command", "args": {"command": ["sh", "-c", "sleep 1"]}},
    {"type": "permission_request", "request_id": "abxyz", "tool": "Bash", "args": {"command": "rm -rf build"}, "rationale": "clean"},
    {"type": "permission_request", "request_id": "hello", "tool": "Read", "args": {}},
    {"type": "ping", "ts": 77},
    {"type": "pong"},
    {"type": "send", "token": "t", "session": "s1", "content": "hi", "meta": {"user": "alice"}},
    {"type": "launch_missiles"},
    {"type": "tool_call", "call_id": "c1"},
]:
    put("bridge_frame", frame)
put("bridge_frame", "[1]")

# The agent service (seed 001): streams, and the tool requests in them.
calls = [
    {"id": "toolcall_1", "name": "read_file", "arguments": {"path": "notes.md"}, "risk": "safe"},
    {"id": "toolcall_2", "name": "run_command", "arguments": {"command": "ls"}, "risk": "risky", "reason": "the test asks"},
    {"id": "toolcall_3", "name": "write_file", "arguments": {"path": "a", "content": "b"}, "risk": "forbidden"},
    {"id": "t4", "name": "x", "risk": "extreme"},
    {"name": "read_file", "risk": "safe"},
]
for call in calls:
    put("agent_service_body", call)
streams = [
    b"event: assistant.delta\ndata: {\"text\":\"Sure - \"}\n\n: heartbeat\n\nevent: tool.request\r\ndata: "
    + json.dumps(calls[0]).encode() + b"\r\n\r\nevent: assistant.final\ndata: {\"text\":\"Done.\"}\n\n",
    b"data: a\ndata: b\n\n",
    b"event: error\ndata: {\"code\":\"RATE_LIMITED\",\"message\":\"slow down\"}\n\n",
    b"id: 7\nretry: 100\nevent: tool.request\ndata: " + json.dumps(calls[1]).encode() + b"\n\n",
]
for stream in streams:
    for cut in (1, 7, 255):
        put("sse_stream", bytes([cut]) + stream)

# The command queue (seed 003): heartbeat answers and their commands.
commands = [
    {"id": "cmd_read", "intent": "filesystem.read_file", "payload": {"skill": "filesystem", "method": "read_file", "params": {"path": "notes.md"}}, "airlockLevel": 0},
    {"id": "cmd_write", "intent": "filesystem.write_file", "payload": {"skill": "filesystem", "method": "write_file", "params": {"path": "a", "content": "b"}}, "airlockLevel": 1, "approvalTimeoutSecs": 0},
    {"id": "cmd_shell", "intent": "shell.execute_command", "payload": {"skill": "shell", "method": "execute_command", "params": {"command": "id"}}, "airlockLevel": 2},
    {"id": "cmd_search", "payload": {"skill": "filesystem", "method": "search_files", "params": {"query": "x", "search_content": True}}, "priority": "high"},
    {"id": "a/../b", "intent": "filesystem.read_file"},
    {"id": "badpayload", "intent": "filesystem.read_file", "payload": "read everything"},
]
put("command_queue_body", {"success": True, "pendingCommands": commands})
put("command_queue_body", {"success": True, "commands": commands[:2]})
for command in commands:
    put("command_queue_body", command)

# Setup codes (`openclaw qr --setup-code-only`).
def code(payload):
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()


for payload in [
    {"url": "ws://127.0.0.1:18789", "bootstrapToken": "bt-0123456789abcdef", "expiresAtMs": 1900000000000},
    {"url": "wss://gw.example:443", "urls": ["wss://gw.example:443"], "bootstrapToken": "bt-token-long-enough",
     "tlsFingerprint": "sha256:" + ":".join(["ab"] * 32)},
    {"url": "http://127.0.0.1", "bootstrapToken": "x"},
    {"url": "ws://[::1]:1", "bootstrapToken": " ", "expiresAtMs": 1},
]:
    put("setup_code", code(payload))
    put("setup_code", "oc-pair://" + code(payload))
put("setup_code", "not a code!")

# The exec-approvals document (OpenClaw's `system.execApprovals.set`).
for params in [
    {"file": {"version": 1, "defaults": {"security": "allowlist", "ask": "on-miss", "askFallback": "deny", "autoAllowSkills": False},
              "agents": {"*": {"allowlist": [{"id": "e1", "pattern": "/bin/ls", "source": "allow-always", "lastUsedAt": 1795306417348}]},
                         "main": {"ask": "always", "allowlist": ["/usr/bin/*", {"pattern": "/bin/sh", "argPattern": "sha256:cwd-argv:v1:00"}]}}},
     "argv": ["ls", "-la"], "cwd": "/tmp", "agentId": "main"},
    {"file": {"version": 1, "defaults": {"security": "deny"}}, "baseHash": "x"},
    {"file": {"agents": {"ops": {"security": "full", "allowlist": [{"pattern": "=node-command:0123456789abcdef"}, {"pattern": "  "}]}}},
     "argv": ["/bin/sh", "-c", "uname -s"]},
    {"file": {"agents": []}},
    {"baseHash": ""},
]:
    put("exec_approvals", params)

# Argvs: shell wrappers, and what the forbidden rules must hold against.
argvs = [
    ["/bin/sh", "-lc", "echo hello-from-node; uname -s"],
    ["bash", "-c", "ls"],
    ["zsh", "-x", "-c", "ls"],
    ["cmd.exe", "/d", "/s", "/c", "dir"],
    ["C:\\Windows\\System32\\cmd.exe", "/c", "echo hi"],
    ["pwsh", "-NoProfile", "-Command", "Get-ChildItem"],
    ["powershell.exe", "-c", "ls"],
    ["ls", "-la"],
    ["sh", "-c"],
]
for words in argvs:
    put("shell_wrapper", argv(*words))
forbidden = [
    ["/", "sudo", "ls"],
    ["/tmp", "/usr/bin/sudo", "-u", "root", "id"],
    ["/tmp", "rm", "-rf", "/"],
    ["/tmp", "rm", "-f", "-r", "/"],
    ["/tmp", "rm", "/", "-rf"],
    ["/tmp", "rm", "-rf", "//"],
    ["/tmp", "rm", "-rf", "/./usr/"],
    ["/tmp", "rm", "-rf", "$HOME"],
    ["/tmp", "sh", "-c", "rm -rf ${HOME}"],
    ["/", "rm", "-rf", "."],
    ["/tmp", "bash", "-lc", "cd / && rm -rf *"],
    ["/tmp", "mkfs.ext4", "/dev/sda1"],
    ["/tmp", "shutdown", "-h", "now"],
    ["/tmp", "ls", "-la"],
]
for words in forbidden:
    put("forbidden", argv(*words))

# Command lines as Windows users write them.
for line in [
    '"C:\\Program Files\\nodejs\\npx.cmd" openclaw  Z:\\a\\b',
    'a "" b',
    "it's",
    "C:\\我的\u3000文件\\x.exe a",
    'open "quote',
    "\tnode\t--flag=\"a b\"",
]:
    put("windows_command_line", line)

# Paths an agent sends (@ROOT, @LINK, @OUT: the fixture's directories).
for path in [
    "sub/file.txt", ".", "./sub/../sub/file.txt", "../etc/passwd", "sub/../../nowhere", "/etc/passwd",
    "@ROOT/sub/file.txt", "@LINK/sub/file.txt", "@ROOT/../outside/secret", "@OUT/secret",
    "in/file.txt", "up/sub/file.txt", "out/secret", "out-file", "dangling", "loop", "state-link/key",
    "key-link", "token-link", ".state/key", "token", "sub/back/token", "sub/escape/outside/secret",
    "sub/deeper/abs-out/etc", "sub/new.txt", "nodir/new.txt", "sub/file.txt/x", "sub/", "sub/.", "a\0b",
]:
    put("workspace_path", path)

# MCP: the messages clients send.
for message in [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": "c3", "method": "tools/call", "params": {"name": "clawbot_router", "arguments": {"agent": "ops", "message": "hi"}, "_meta": {"progressToken": 7}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "clawbot_router", "arguments": {"message": 5}}},
    {"jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": {"name": "clawbot_router", "arguments": {"lang": "en"}}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c3", "reason": "user"}},
    {"jsonrpc": "2.0", "id": 6, "result": {}},
    {"jsonrpc": "1.0", "id": 1.5, "method": 3},
    [{"jsonrpc": "2.0", "id": 7, "method": "ping"}],
]:
    put("mcp_message", message)

# browser.proxy: what the gateway forwards of an agent's `browser` calls.
def proxy(method, path, body=None, query=None, **extra):
    p = {"method": method, "path": path, "timeoutMs": 20000, "errorEnvelope": "browser-v1", "profile": "openclaw"}
    if body is not None:
        p["body"] = body
    if query is not None:
        p["query"] = query
    p.update(extra)
    return p


for params in [
    proxy("GET", "/"), proxy("GET", "/tabs"), proxy("POST", "/tabs/open", {"url": "http://127.0.0.1/"}),
    proxy("GET", "/snapshot", query={"format": "ai", "limit": 50, "maxChars": 1000, "interactive": True, "depth": 3}),
    proxy("GET", "/snapshot", query={"format": "aria", "selector": "#x"}),
    proxy("POST", "/act", {"kind": "click", "ref": "e1", "targetId": "t1"}),
    proxy("POST", "/act", {"kind": "type", "ref": "e2", "text": "hi", "submit": True}),
    proxy("POST", "/act", {"kind": "fill", "fields": [{"ref": "e3", "type": "checkbox", "value": True}]}),
    proxy("POST", "/act", {"kind": "evaluate", "fn": "() => 1"}),
    proxy("POST", "/act", {"kind": "wait", "fn": "() => true"}),
    proxy("POST", "/act", {"kind": "wait", "text": "done", "timeoutMs": 500}),
    proxy("POST", "/act", {"kind": "batch", "actions": [{"kind": "hover", "ref": "e1"}, {"kind": "batch", "actions": [{"kind": "evaluate", "fn": "1"}]}]}),
    proxy("POST", "/act", {"kind": "batch", "actions": [{"kind": "scrollIntoView", "ref": "e1"}, {"kind": "resize", "width": 800, "height": 600}]}),
    proxy("POST", "/act", {"kind": "press", "key": "Control+a"}), proxy("POST", "/act", {"kind": "click", "selector": "#x"}),
    proxy("POST", "/hooks/file-chooser", {"paths": ["/tmp/x"], "ref": "e4"}),
    proxy("POST", "/hooks/file-chooser", {"ref": "e4"}, upload={"files": [{"name": "a.txt", "base64": "aGk=", "mimeType": "text/plain"}]}),
    proxy("POST", "/hooks/dialog", {"accept": True, "promptText": "x"}), proxy("POST", "/download", {"ref": "e5", "path": "../x"}),
    proxy("POST", "/screenshot", {"fullPage": True, "type": "jpeg"}), proxy("DELETE", "/tabs/t1"),
    proxy("POST", "/set/headers", {"headers": {"X": "1"}}), proxy("GET", "/nosuch"), {"method": "PUT", "path": "/"},
]:
    put("browser_proxy_params", params)

# Accessibility trees as Chromium sends them (Accessibility.getFullAXTree's
# nodes), one byte of options in front.
def ax(node_id, role, name="", children=(), parent=None, backend=None, **extra):
    n = {"nodeId": node_id, "ignored": False, "role": {"type": "role", "value": role},
         "name": {"type": "computedString", "value": name}, "childIds": list(children)}
    if parent:
        n["parentId"] = parent
    if backend is not None:
        n["backendDOMNodeId"] = backend
    n.update(extra)
    return n


page = [
    ax("1", "RootWebArea", "Test", ["2", "3", "4", "8"], backend=1),
    ax("2", "heading", "Order form", ["9"], "1", 2, properties=[{"name": "level", "value": {"type": "integer", "value": 1}}]),
    ax("9", "StaticText", "Order form", [], "2", 9),
    ax("3", "form", "", ["5", "6", "7"], "1", 3),
    ax("5", "textbox", "Your name", [], "3", 5, value={"type": "string", "value": "Ada"}),
    ax("6", "checkbox", "Gift wrap", [], "3", 6, properties=[{"name": "checked", "value": {"type": "tristate", "value": "true"}}]),
    ax("7", "button", "Place order", [], "3", 7),
    ax("4", "generic", "", ["10"], "1", 4, ignored=True),
    ax("10", "link", "Second page", [], "4", 10, properties=[{"name": "url", "value": {"type": "string", "value": "http://h/x"}}]),
    ax("8", "combobox", "Size", ["11"], "1", 8),
    ax("11", "option", "Small", [], "8", 11, properties=[{"name": "selected", "value": {"type": "booleanOrUndefined", "value": True}}]),
]
for pick in [0, 1, 2, 5 | (2 << 5), 8, 16, 31]:
    put("browser_snapshot", bytes([pick]) + json.dumps(page).encode())
put("browser_snapshot", b"\x00" + json.dumps([ax("1", "generic", "", ["1"], backend=1)]).encode())
put("browser_snapshot", b"\x00" + json.dumps([ax("1", "RootWebArea", "", ["2"]), ax("2", "button", "\u202e\n- evil [ref=e9]", [], "1", 2)]).encode())

print("seeded", file=sys.stderr)
