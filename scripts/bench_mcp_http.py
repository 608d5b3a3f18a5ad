#!/usr/bin/env python3
"""`mcp --http` against hostile and careless peers, measured (README
"Over HTTP": Limits), this build and optionally an older one side by side.

Usage: cargo build --release && python3 scripts/bench_mcp_http.py
           [--baseline DIR] [--sessions N] [--conformance BIN]

1. session flood: the server's RSS after N `initialize`s in a row on one
   keep-alive connection (each opens a session nobody ends), and how long
   they took.
2. lock-out: 130 idle keep-alive connections held from 127.0.0.1, then a
   new client's `initialize`: how long until it is answered (or "locked
   out" after 10 s).
3. hang-up: a call runs a two-level tree (`--timeout 300`); its client
   closes the connection: how long until the tree is gone (or "still
   running" after 20 s).
4. with --conformance (scripts/sandbox.sh env exports
   CLAWBOT_SANDBOX_CONFORMANCE; Node.js on PATH): the official conformance
   suite's whole server run against this build, wall time.

--baseline DIR names a directory holding an older build's clawbot_router,
clawbot_router-full and fake-openclaw. Prints figures only; asserts nothing.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}).encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`mcp --http` of the build in `bindir`, with the fake openclaw."""

    def __init__(self, bindir, fake_args=(), args=()):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAWBOT_ROUTER_", "FAKE_OPENCLAW_", "OPENCLAW_"))}
        env["OPENCLAW_BIN"] = " ".join([os.path.join(bindir, "fake-openclaw"), *fake_args])
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "clawbot_router"), "mcp", "--grace", "0.5", *args,
             "--http", f"127.0.0.1:{self.port}"],
            env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mcp --http did not start")

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def post(port, body, headers="", timeout=10.0):
    """One POST on a connection of its own; the raw answer (b"" if none)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    s.sendall(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{headers}Content-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n".encode() + body)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    s.close()
    return data


def session_flood(bindir, n):
    server = Server(bindir)
    try:
        before = server.rss_mib()
        s = socket.create_connection(("127.0.0.1", server.port))
        request = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                   "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                   f"Content-Length: {len(INITIALIZE)}\r\n\r\n").encode() + INITIALIZE
        buf = b""
        started = time.perf_counter()
        for _ in range(n):
            s.sendall(request)
            while b"\r\n0\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError("the server closed the connection")
                buf += chunk
            buf = buf.split(b"\r\n0\r\n\r\n", 1)[1]
        took = time.perf_counter() - started
        s.close()
        return before, server.rss_mib(), took
    finally:
        server.stop()


def lock_out(bindir):
    server = Server(bindir)
    held = []
    try:
        for _ in range(130):
            c = socket.create_connection(("127.0.0.1", server.port))
            held.append(c)
        started = time.perf_counter()
        answer = post(server.port, INITIALIZE)
        took = time.perf_counter() - started
        return took if b" 200 " in answer.split(b"\r\n", 1)[0] + b" " else None
    finally:
        for c in held:
            c.close()
        server.stop()


def hang_up(bindir):
    with tempfile.TemporaryDirectory() as d:
        pid_file = os.path.join(d, "pids")
        server = Server(bindir, ["--scenario", "grandchild", "--pid-file", pid_file],
                        ["--timeout", "300"])
        try:
            answer = post(server.port, INITIALIZE)
            sid = next(line.split(b":", 1)[1].strip().decode()
                       for line in answer.split(b"\r\n") if line.lower().startswith(b"mcp-session-id:"))
            headers = f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            post(server.port, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers)
            call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "clawbot_router", "arguments": {"message": "hang"}}}).encode()
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\n{headers}Content-Length: {len(call)}\r\n\r\n"
                .encode() + call)
            deadline = time.monotonic() + 20
            pids = []
            while len(pids) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
                if os.path.exists(pid_file):
                    pids = [int(p) for p in open(pid_file).read().split()]

            def alive(pid):
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        return f.read().split(") ")[1][0] != "Z"
                except OSError:
                    return False

            s.close()
            started = time.perf_counter()
            while any(alive(p) for p in pids):
                if time.perf_counter() - started > 20:
                    for p in pids:
                        try:
                            os.kill(p, 9)
                        except OSError:
                            pass
                    return None
                time.sleep(0.005)
            return time.perf_counter() - started
        finally:
            server.stop()


def conformance(bindir, suite):
    server = Server(bindir, ["--scenario", "reply"])
    try:
        started = time.perf_counter()
        subprocess.run([suite, "server", "--url", f"http://127.0.0.1:{server.port}/mcp"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - started
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", help="a directory holding an older build's binaries")
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--conformance", default=os.environ.get("CLAWBOT_SANDBOX_CONFORMANCE"))
    args = parser.parse_args()
    builds = [("this build", RELEASE)]
    if args.baseline:
        builds.append(("baseline", args.baseline))
    for name, bindir in builds:
        before, after, took = session_flood(bindir, args.sessions)
        print(f"{name}: session flood: {args.sessions} initialize in {took:.1f} s; "
              f"RSS {before:.1f} -> {after:.1f} MiB (+{after - before:.1f})", flush=True)
        took = lock_out(bindir)
        print(f"{name}: a new client beside 130 idle connections: "
              + (f"answered in {took * 1e3:.1f} ms" if took is not None else "locked out (no answer in 10 s)"),
              flush=True)
        took = hang_up(bindir)
        print(f"{name}: client hangs up mid-call: "
              + (f"tree gone {took * 1e3:.0f} ms later" if took is not None else "tree still running after 20 s"),
              flush=True)
        if args.conformance:
            print(f"{name}: conformance suite, whole server run: {conformance(bindir, args.conformance):.2f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
