#!/usr/bin/env python3
"""A fake OpenAI-compatible model server for OpenClaw sandboxes (stdlib only).

POST /v1/chat/completions (streaming SSE, as OpenClaw always asks, or not):
the reply to a user message M is `ECHO: M`. Directives inside M change that:
  [[delay:SECS]]      answer after SECS seconds (a caller that hangs up first is
                      logged in <log>.hangups)
  [[fail:STATUS]]     answer with HTTP STATUS
  [[exec:COMMAND]]    call the `exec` tool with {"command": COMMAND, "host": "node"};
                      once a tool result is in the conversation, answer
                      `RESULT: <result>` (not `TOOL RESULT:`: OpenClaw
                      strips a line that starts like a tool trace)
  [[tool:NAME ARGS]]  the same with the tool named NAME, ARGS a JSON object
                      (nested braces and all); when the request does not offer
                      NAME but offers `tool_call` (OpenClaw's Tool Search, its
                      default: plugin and node tools are deferred), it calls
                      tool_call {"id": NAME, "args": ARGS}; neither: the reply
                      says which tools there were
  [[then:NAME ARGS]]  after a [[tool:…]], more calls in the same turn, one per
                      tool result so far (in order); `{{frameId}}` in ARGS is
                      the last `frameId <id>` the results so far mention (the
                      computer tool's screenshots)
Background prompts of the gateway (asking to reply NO_REPLY) get NO_REPLY.
GET /v1/models lists the model. Every request body is appended to the log
file (one JSON line each) so tests can check what reached the model.

Usage: fake_model.py --port PORT --log FILE
"""
import argparse
import json
import re
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-model"
LOG_LOCK = threading.Lock()


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


QUEUED_MARKER = "[Queued user message from a previous active turn;"
CONTINUATION = "Continue the current task from the existing transcript"


def synthetic(text):
    """A user message OpenClaw writes itself: its internal context, or the
    images of a tool result (a model with image input gets them so)."""
    return text.startswith("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>") or text.startswith("Image(s) from tool result")


def user_text(messages):
    """The user's own words in this turn: the last user message that is not
    OpenClaw's internal context, without its timestamp prefix and runtime
    footer (earlier turns of the session come before it)."""
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        t = text_of(m.get("content"))
        if synthetic(t):
            continue
        t = re.sub(r"^\[[^\]]*\] ", "", t, count=1)
        cut = t.find("\n\nRuntime:")
        return t if cut < 0 else t[:cut]
    return ""


def tool_results(messages):
    """Tool results of this turn: those after the user's last own message
    (earlier turns of the session may hold results of their own)."""
    last_user = 0
    for i, m in enumerate(messages):
        if m.get("role") == "user" and not synthetic(text_of(m.get("content"))):
            last_user = i
    return [text_of(m.get("content")) for m in messages[last_user:] if m.get("role") == "tool"]


def parse_tool_directive(text, kind="tool", start=0):
    """[[tool:NAME {json}]] -> (NAME, dict), the JSON object parsed whole
    (nested braces included); None when there is no such directive."""
    found = parse_directive_at(text, kind, start)
    return found[:2] if found else None


def parse_chain(text):
    """[[tool:…]] then each [[then:…]] after it: [(NAME, dict), …]."""
    first = parse_directive_at(text, "tool", 0)
    if not first:
        return []
    chain, at = [first[:2]], first[2]
    while True:
        more = parse_directive_at(text, "then", at)
        if not more:
            return chain
        chain.append(more[:2])
        at = more[2]


def parse_directive_at(text, kind, start):
    m = re.compile(r"\[\[" + kind + r":([A-Za-z0-9_.:-]+)").search(text, start)
    if not m:
        return None
    rest = text[m.end():]
    stripped = rest.lstrip()
    args = {}
    if stripped.startswith("{"):
        try:
            args, used = json.JSONDecoder().raw_decode(stripped)
        except ValueError:
            return None
        stripped = stripped[used:].lstrip()
    if not stripped.startswith("]]") or not isinstance(args, dict):
        return None
    return m.group(1), args, len(text) - len(stripped) + 2


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self.send_json(200, {"ok": True})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.send_json(400, {"error": {"message": "bad json"}})
            return
        with LOG_LOCK, open(self.server.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(body, ensure_ascii=False) + "\n")
        messages = body.get("messages", [])
        said = user_text(messages)
        everything = "\n".join(text_of(m.get("content")) for m in messages)
        # OpenClaw prepends an aborted turn's message to the session's next
        # one ("[Queued user message ...]\n<old>\n\n<new>"): the echo shows
        # it, but directives are the new message's alone — unless the new
        # one is OpenClaw's own retry of the same task ("Continue the
        # current task ..."), which carries the task's directives on.
        active = said
        if QUEUED_MARKER in said:
            newest = said.split("\n\n")[-1]
            if not newest.startswith(CONTINUATION):
                active = newest

        m = re.search(r"\[\[delay:([0-9.]+)\]\]", active)
        if m and not self.wait_or_hangup(float(m.group(1))):
            # The caller gave up (an aborted run): say so in <log>.hangups.
            with LOG_LOCK, open(self.server.log_path + ".hangups", "a", encoding="utf-8") as f:
                f.write(json.dumps({"said": said}, ensure_ascii=False) + "\n")
            return
        m = re.search(r"\[\[fail:(\d{3})\]\]", active)
        if m:
            self.send_json(int(m.group(1)), {"error": {"message": "fake failure", "type": "fake"}})
            return

        tool_call = None
        results = tool_results(messages)
        m = re.search(r"\[\[exec:(.*?)\]\]", active, re.S)
        chain = parse_chain(active)
        named = chain[len(results)] if len(results) < len(chain) else None
        if named and results:
            frames = re.findall(r"frameId ([0-9a-f-]{36})", "\n".join(results))
            if frames:
                named = (named[0], json.loads(json.dumps(named[1]).replace("{{frameId}}", frames[-1])))
        offered = [t.get("function", {}).get("name", "") for t in body.get("tools", [])]
        if m and not results:
            tool_call = {"name": "exec", "arguments": json.dumps({"command": m.group(1), "host": "node"})}
            reply = ""
        elif named:
            want, args = named
            name = want if want in offered else None
            if name:
                tool_call = {"name": name, "arguments": json.dumps(args)}
                reply = ""
            elif "tool_call" in offered:
                # Tool Search (OpenClaw's default): plugin and node tools are
                # deferred and called through tool_call {id, args}.
                tool_call = {"name": "tool_call", "arguments": json.dumps({"id": want, "args": args})}
                reply = ""
            else:
                reply = f"NO TOOL {want} among: " + ", ".join(offered)
        elif results:
            reply = "RESULT: " + results[-1]
        elif "NO_REPLY" in everything and not said:
            reply = "NO_REPLY"
        else:
            reply = "ECHO: " + said
        self.call_id = f"call_{len(results) + 1}"
        if body.get("stream"):
            self.stream(reply, tool_call)
        else:
            msg = {"role": "assistant", "content": reply or None}
            if tool_call:
                msg["tool_calls"] = [{"id": self.call_id, "type": "function", "function": tool_call}]
            self.send_json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
                "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if tool_call else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })

    def wait_or_hangup(self, secs):
        """Sleeps `secs`; False as soon as the client closes its end."""
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.connection], [], [], min(0.05, max(0, deadline - time.monotonic())))
            if ready:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False
                time.sleep(0.05)  # pipelined bytes, not a hangup
        return True

    def stream(self, reply, tool_call):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}

        def chunk(delta, finish=None, usage=None):
            c = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            if usage:
                c["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if tool_call:
            chunk({"tool_calls": [{"index": 0, "id": self.call_id, "type": "function", "function": tool_call}]})
            chunk({}, "tool_calls")
        else:
            for i in range(0, len(reply), 64):
                chunk({"content": reply[i:i + 64]})
            chunk({}, "stop")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        self.wfile.write(b"data: " + json.dumps(dict(base, choices=[], usage=usage)).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18555)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.log_path = args.log
    print(f"fake model on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
