#!/usr/bin/env python3
"""The links against hostile peers (BENCHMARKS.md item 9): figures, never
assertions.

  poll    the reference command queue (tests/fixtures/command-queue) floods:
          every heartbeat answer carries 100 new commands of 32 KiB each and
          every `start` takes a minute. The RSS of `clawbot_router poll`
          (--active-ms 50) is sampled every second for --seconds.
  bridge  strangers connect to `clawbot_router bridge`, upgrade to
          WebSocket, never say hello, and each sends the first MiB of a
          16 MiB frame. The bridge's RSS before, at the peak, and after
          they are all closed — twice, to show that what they held comes
          back rather than piling up.

Usage: scripts/bench_links.py [--router PATH] [--baseline PATH]
           [--seconds 20] [--strangers 500] [--only poll|bridge]
--router is the build to measure (default target/release/clawbot_router);
--baseline an older build measured the same way, side by side.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY = "bench-key-0123456789"
TOKEN = "bench-token-0123456789"


def rss_mib(pid):
    """The resident set of `pid`, in MiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cloud(tmp):
    port_file = os.path.join(tmp, "port")
    child = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tests/fixtures/command-queue/cloud.py"), port_file, KEY],
        # Its tracebacks for connections the killed node left half-done.
        stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    while not os.path.exists(port_file):
        time.sleep(0.02)
    with open(port_file) as f:
        return child, int(f.read())


def test_api(port, path, body=None):
    data = json.dumps(body or {}).encode()
    method = "GET" if path == "/test/state" else "POST"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=None if method == "GET" else data, method=method)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def bench_poll(router, seconds):
    """RSS samples of `poll` under the flooding queue: [(s, MiB, offered)]."""
    with tempfile.TemporaryDirectory() as tmp:
        queue, port = cloud(tmp)
        os.makedirs(os.path.join(tmp, "ws"))
        node = subprocess.Popen(
            [router, "poll", "--api", f"http://127.0.0.1:{port}", "--active-ms", "50", "--idle-ms", "50",
             "--state-dir", os.path.join(tmp, "state"), "--workspace", os.path.join(tmp, "ws")],
            env={**os.environ, "CLAWBOT_ROUTER_POLL_KEY": KEY},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            while test_api(port, "/test/state")["heartbeats"] < 1:
                time.sleep(0.05)
            samples = [(0, rss_mib(node.pid), 0)]
            test_api(port, "/test/flood", {"per_beat": 100, "pad": 32 << 10, "slow_start": 60})
            start = time.monotonic()
            for second in range(1, seconds + 1):
                time.sleep(max(0, start + second - time.monotonic()))
                flood = test_api(port, "/test/state")["flood"]
                samples.append((second, rss_mib(node.pid), flood["offered"], flood["started"]))
            return samples
        finally:
            node.kill()
            node.wait()
            queue.kill()
            queue.wait()


def upgrade(port):
    """A WebSocket connection to /bridge that has said nothing yet."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(
        b"GET /bridge HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(4096)
        if not chunk:
            raise OSError("closed during the upgrade")
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 101"):
        raise OSError(answer.split(b"\r\n")[0].decode())
    s.setblocking(False)
    return s


def flood_bridge(port, pid, strangers):
    """One flood of strangers: (peak RSS, RSS 3 s after they closed, how
    many upgraded, MiB their sockets took)."""
    frame = 16 << 20
    # A masked text frame's header announcing 16 MiB; zeros as the mask.
    header = bytes([0x81, 0xFF]) + frame.to_bytes(8, "big") + b"\0\0\0\0"
    sockets, left, upgraded, pushed, peak = [], {}, 0, 0, 0
    for _ in range(strangers):
        try:
            s = upgrade(port)
        except OSError:
            continue
        upgraded += 1
        sockets.append(s)
        left[s] = header + b"x" * (1 << 20)
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        for s in list(left):
            try:
                n = s.send(left[s][:1 << 20])
            except BlockingIOError:
                continue
            except OSError:
                del left[s]
                continue
            pushed += n
            left[s] = left[s][n:]
            if not left[s]:
                del left[s]
        peak = max(peak, rss_mib(pid) or 0)
    for _ in range(10):
        time.sleep(0.1)
        peak = max(peak, rss_mib(pid) or 0)
    for s in sockets:
        s.close()
    time.sleep(3)
    return peak, rss_mib(pid), upgraded, pushed / (1 << 20)


def bench_bridge(router, strangers):
    """The bridge's idle RSS, and two floods' figures (flood_bridge)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "ws"))
        bridge = subprocess.Popen(
            [router, "bridge", "--listen", "127.0.0.1:0", "--session", "s1",
             "--state-dir", os.path.join(tmp, "state"), "--workspace", os.path.join(tmp, "ws")],
            env={**os.environ, "CLAWBOT_BRIDGE_TOKEN": TOKEN},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            line = ""
            while "listening on ws://" not in line:
                line = bridge.stderr.readline()
            port = int(re.search(r"ws://[\d.]+:(\d+)/", line).group(1))
            subprocess.Popen(["cat"], stdin=bridge.stderr, stdout=subprocess.DEVNULL)
            time.sleep(0.5)
            idle = rss_mib(bridge.pid)
            return idle, [flood_bridge(port, bridge.pid, strangers) for _ in range(2)]
        finally:
            bridge.kill()
            bridge.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--router", default=os.path.join(ROOT, "target/release/clawbot_router"))
    parser.add_argument("--baseline")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--strangers", type=int, default=500)
    parser.add_argument("--only", choices=["poll", "bridge"])
    args = parser.parse_args()
    builds = [("this build", os.path.abspath(args.router))]
    if args.baseline:
        builds.insert(0, ("baseline", os.path.abspath(args.baseline)))
    if args.only in (None, "poll"):
        print("poll under a flooding queue (100 new 32 KiB commands per answer, start takes 60 s), RSS MiB:")
        results = [(name, bench_poll(path, args.seconds)) for name, path in builds]
        print("  s  " + "  ".join(f"{name:>22}" for name, _ in results))
        for i in range(args.seconds + 1):
            cells = []
            for _, samples in results:
                sample = samples[i]
                cells.append(f"{sample[1]:8.1f} ({sample[2]:>6} offered)" if sample[1] is not None else f"{'gone':>22}")
            print(f"{i:3}  " + "  ".join(cells))
        for name, samples in results:
            print(f"  {name}: commands started {samples[-1][3] if len(samples[-1]) > 3 else 0}")
    if args.only in (None, "bridge"):
        print(f"bridge under {args.strangers} strangers, each 1 MiB into a 16 MiB frame before hello, RSS MiB:")
        for name, path in builds:
            idle, floods = bench_bridge(path, args.strangers)
            rounds = "; ".join(
                f"flood {i + 1}: peak {peak:.1f}, 3 s after they closed {after:.1f} "
                f"({upgraded} upgraded, {sent:.0f} MiB sent)"
                for i, (peak, after, upgraded, sent) in enumerate(floods)
            )
            print(f"  {name:>10}: idle {idle:.1f}; {rounds}")

if __name__ == "__main__":
    main()
