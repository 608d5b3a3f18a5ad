#!/usr/bin/env python3
"""Benchmarks against the real OpenClaw (needs `scripts/sandbox.sh up` and
`eval "$(scripts/sandbox.sh env)"`, and `cargo build --release`).

4. node host: clawbot_router node vs OpenClaw's `openclaw node run` on the
   same gateway — start → hello-ok, RSS idle and after N invokes, and the
   system.which round trip (p50/p90/p99) from a WebSocket operator client.
5. end-to-end router call with the instant fake model: wall time of the CLI
   path (`--via cli`) and of the gateway path (`--via gateway`), interleaved,
   the same number of calls each (target: gateway >= 5x faster); where the
   CLI path's time goes (the turn's own durationMs vs CLI start-up); and the
   same turn over one operator WebSocket from Node.js, for reference.
7. a published tool (node-mcp): `mcp.tools.call.v1 {server: clawbot, tool:
   read_file}` vs `node.invoke read_file` of the same file, from one
   operator WebSocket, rounds interleaved (p50/p90/p99 per round).
8. a local MCP server proxied to the agents: the same server
   (@modelcontextprotocol/server-filesystem, from scripts/sandbox.sh
   install) behind `clawbot_router node --mcp-server` and behind
   `openclaw node run` (nodeHost.mcp.servers), on one gateway: start →
   the server's tool answering, RSS of each node process and of its whole
   tree (the server included), and the `mcp.tools.call.v1 read_text_file`
   round trip, rounds interleaved.
14. the browser on the node (issue 25): `clawbot_router node --browser`
   vs `openclaw node run` with its browser (node-commands.md §1.7), one
   gateway, one local test page (tests/fixtures/browser), both nodes paired
   first: node start → first ai snapshot through `browser.request` (the
   browser's own start included), the snapshot+click round trip, and the
   RSS of the node host without its browser (and of the browser, for
   scale); runs interleaved. Needs Debian's chromium (scripts/chromium.sh).
Prints figures; asserts nothing.

Usage: python3 scripts/bench_openclaw.py [--only 4|5|7|8|14] [--runs N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTER = os.path.join(ROOT, "target", "release", "clawbot_router")
OPERATOR = os.path.join(ROOT, "scripts", "bench", "operator.mjs")
N = int(os.environ.get("BENCH_INVOKES", "1000"))


def process_table():
    """({ppid: [pid]}, {pid: executable}) of every process now."""
    children, exe = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError):
                continue
            try:
                exe[int(entry)] = os.readlink(f"/proc/{entry}/exe")
            except OSError:
                pass
    return children, exe


def tree_rss_kib(pid):
    """RSS of pid and all its descendants, KiB."""
    children, _ = process_table()
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def openclaw(*args):
    out = subprocess.run(["openclaw", *args], capture_output=True, text=True)
    return out.stdout


def wait_for(predicate, limit=120, step=0.01):
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        if predicate():
            return time.perf_counter() - start
        time.sleep(step)
    raise SystemExit("timed out")


def pending_request(name):
    for p in json.loads(openclaw("nodes", "pending", "--json") or "[]"):
        if p.get("displayName") == name:
            return p["requestId"], p["nodeId"]
    return None


GATEWAY_LOG = os.path.join(os.environ.get("CLAWBOT_SANDBOX_DIR", "/tmp/clawbot-sandbox"), "logs", "gateway.out")


def bench_node(label, argv, name):
    """Starts a node host, times start → hello-ok (both hosts send
    node.runnerInventory.update right after it; the gateway logs it),
    approves its surface, measures RSS and the invoke round trip."""
    seen = os.path.getsize(GATEWAY_LOG)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def greeted():
        with open(GATEWAY_LOG, encoding="utf-8", errors="replace") as f:
            f.seek(seen)
            return "node.runnerInventory.update" in f.read()

    hello = wait_for(greeted)
    found = []
    wait_for(lambda: bool(found.append(pending_request(name)) or found[-1]), step=0.5)
    request, node_id = found[-1]
    openclaw("nodes", "approve", request)
    time.sleep(3)
    idle = tree_rss_kib(proc.pid)
    out = subprocess.run(["node", OPERATOR, "invoke", node_id, str(N)], capture_output=True, text=True)
    stats = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr.strip()}
    after = tree_rss_kib(proc.pid)
    os.killpg(proc.pid, 15)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    print(f"{label}: start → hello-ok {hello*1e3:.0f} ms; RSS idle {idle/1024:.1f} MiB, after {N} invokes "
          f"{after/1024:.1f} MiB; system.which round trip {fmt(stats)}")
    return stats


def fmt(s):
    if "error" in s:
        return "failed: " + s["error"]
    return f"p50 {s['p50']:.2f} ms, p90 {s['p90']:.2f} ms, p99 {s['p99']:.2f} ms"


def router_turn(via, message):
    """One router call; (wall seconds, whether the reply came back)."""
    t = time.perf_counter()
    out = subprocess.run([ROUTER, "--via", via, "-a", "main", "-m", message, "--timeout", "120"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    try:
        ok = json.loads(out.stdout)["content"].startswith(f"ECHO: {message}")
    except (ValueError, KeyError):
        ok = False
    return wall, ok


def bench_turn(runs):
    # One unmeasured call per path first: the gateway's first turn after a
    # pause does start-up work of its own (seconds) that neither path owns.
    router_turn("cli", "bench warm-up cli")
    router_turn("gateway", "bench warm-up gateway")
    cli, gw, turns, ws, failed = [], [], [], [], []
    for i in range(runs):  # interleaved, so drift hits both paths alike
        for via, walls in (("cli", cli), ("gateway", gw)):
            wall, ok = router_turn(via, f"bench {via} {i}")
            if ok:
                walls.append(wall)
            else:
                failed.append(f"{via} #{i}")
        out = openclaw("agent", "--agent", "main", "--message", f"bench json {i}", "--json")
        try:
            turns.append(json.loads(out)["result"]["meta"]["durationMs"] / 1000)
        except (ValueError, KeyError):
            pass
        out = subprocess.run(["node", OPERATOR, "agent", f"bench ws {i}"], capture_output=True, text=True)
        if out.returncode == 0:
            ws.append(json.loads(out.stdout)["totalMs"] / 1000)
    if failed:
        print(f"calls without the reply (left out): {failed}")
    if not cli or not gw:
        sys.exit("no successful calls on one of the paths")
    c, g = statistics.median(cli), statistics.median(gw)
    turn = statistics.median(turns) if turns else float("nan")
    print(f"router --via cli: {c*1e3:.0f} ms wall (median of {len(cli)}, range {min(cli)*1e3:.0f}-{max(cli)*1e3:.0f}); "
          f"the turn itself {turn*1e3:.0f} ms, so ~{(c-turn)*1e3:.0f} ms is openclaw CLI start-up and connect")
    print(f"router --via gateway: {g*1e3:.0f} ms wall (median of {len(gw)}, range {min(gw)*1e3:.0f}-{max(gw)*1e3:.0f}); "
          f"{c/g:.1f}x faster than --via cli  target >= 5x")
    if ws:
        w = statistics.median(ws)
        print(f"for reference, the same turn over one operator WebSocket from Node.js (scripts/bench/operator.mjs): "
              f"{w*1e3:.0f} ms ({c/w:.1f}x faster than --via cli)")


def interleaved(paths, rounds, per_round):
    """{label: (node id, command, params)}: `per_round` invokes of each
    from one operator WebSocket, the paths taking turns round by round (so
    drift hits all alike); prints and returns {label: [stats per round]}."""
    results = {label: [] for label in paths}
    for _ in range(rounds):
        for label, (node_id, command, params) in paths.items():
            out = subprocess.run(["node", OPERATOR, "invoke", node_id, str(per_round), command,
                                  json.dumps(params)], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{label}: {out.stderr.strip()}")
            results[label].append(json.loads(out.stdout))
    for label, runs in results.items():
        print(f"{label}: " + "; ".join(
            f"p50 {r['p50']:.2f} p90 {r['p90']:.2f} p99 {r['p99']:.2f} ms" for r in runs))
    return results


def bench_published(rounds, per_round=200):
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "bench.txt"), "w") as f:
        f.write("published tool bench\n" * 20)
    name = "bench-published"
    proc = subprocess.Popen([ROUTER, "node", "--display-name", name, "--state-dir", f"{tmp}/state",
                             "--workspace", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        found = []
        wait_for(lambda: bool(found.append(pending_request(name)) or found[-1]), step=0.5)
        request, node_id = found[-1]
        openclaw("nodes", "approve", request)
        time.sleep(3)
        args = {"path": "bench.txt"}
        paths = {
            "node.invoke read_file       ": ("read_file", args),
            "mcp.tools.call.v1 read_file ": ("mcp.tools.call.v1",
                                             {"server": "clawbot", "tool": "read_file", "arguments": args}),
        }
        results = interleaved({label: (node_id, command, params) for label, (command, params) in paths.items()},
                              rounds, per_round)
        a, b = results.values()
        ratios = [y["p50"] / x["p50"] for x, y in zip(a, b)]
        print(f"p50 ratio published / direct per round: " + ", ".join(f"{r:.2f}x" for r in ratios))
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(10)


def proc_rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def bench_mcp_proxy(rounds, per_round=200):
    bin_dir = os.environ.get("CLAWBOT_SANDBOX_MCP_BIN")
    if not bin_dir:
        sys.exit("CLAWBOT_SANDBOX_MCP_BIN unset: scripts/sandbox.sh install, then eval its env")
    server = os.path.join(bin_dir, "mcp-server-filesystem")
    tmp = tempfile.mkdtemp()
    docs = os.path.join(tmp, "docs")
    os.makedirs(docs)
    with open(os.path.join(docs, "bench.txt"), "w") as f:
        f.write("proxied tool bench\n" * 20)
    with open(os.path.join(tmp, "oc.json"), "w") as f:
        json.dump({"nodeHost": {"mcp": {"servers": {"fs": {"command": server, "args": [docs]}}}}}, f)
    port = os.environ["OPENCLAW_GATEWAY_URL"].rsplit(":", 1)[1]
    hosts = {
        "clawbot_router node": ("bench-mcp-ours", [ROUTER, "node", "--display-name", "bench-mcp-ours", "--state-dir",
                                                   f"{tmp}/ours", "--workspace", tmp, "--mcp-server",
                                                   f"fs={server} {docs}"]),
        "openclaw node run  ": ("bench-mcp-openclaw",
                                ["env", f"OPENCLAW_STATE_DIR={tmp}/oc-node", f"OPENCLAW_CONFIG_PATH={tmp}/oc.json",
                                 "openclaw", "node", "run", "--host", "127.0.0.1", "--port", port, "--no-tls",
                                 "--display-name", "bench-mcp-openclaw"]),
    }
    params = {"server": "fs", "tool": "read_text_file", "arguments": {"path": os.path.join(docs, "bench.txt")}}
    procs, nodes = {}, {}
    try:
        for label, (name, argv) in hosts.items():
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            procs[label] = proc
            found = []
            wait_for(lambda: bool(found.append(pending_request(name)) or found[-1]), step=0.5)
            request, node_id = found[-1]
            openclaw("nodes", "approve", request)
            nodes[label] = node_id

            def answers():
                out = subprocess.run(["node", OPERATOR, "invoke", node_id, "1", "mcp.tools.call.v1",
                                      json.dumps(params)], capture_output=True, text=True)
                return out.returncode == 0

            wait_for(answers, step=0.2)
            print(f"{label}: start → the proxied tool answers {time.perf_counter() - t0:.1f} s "
                  f"(including one `openclaw nodes approve`)")
        time.sleep(2)
        for label, proc in procs.items():
            # `env` execs openclaw: the Popen pid is the node process itself.
            print(f"{label}: RSS node process {proc_rss_kib(proc.pid)/1024:.1f} MiB, "
                  f"whole tree (the MCP server included) {tree_rss_kib(proc.pid)/1024:.1f} MiB")
        results = interleaved({f"{label} fs.read_text_file": (nodes[label], "mcp.tools.call.v1", params)
                               for label in hosts}, rounds, per_round)
        ours, theirs = results.values()
        print("p50 ratio openclaw node run / ours per round: " +
              ", ".join(f"{t['p50'] / o['p50']:.2f}x" for o, t in zip(ours, theirs)))
    finally:
        for proc in procs.values():
            try:
                os.killpg(proc.pid, 15)
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, 9)


BROWSER_BENCH = os.path.join(ROOT, "scripts", "bench", "browser.mjs")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "browser")


def split_rss_kib(pid):
    """(node host, browser) RSS of pid's tree, KiB: the browser is every
    process whose executable is Chromium's, and everything under it."""
    children, comm = process_table()
    host = browser = 0
    todo = [(pid, False)]
    while todo:
        p, under_browser = todo.pop()
        is_browser = under_browser or "chrom" in os.path.basename(comm.get(p, ""))
        todo.extend((c, is_browser) for c in children.get(p, []))
        rss = proc_rss_kib(p)
        if is_browser:
            browser += rss
        else:
            host += rss
    return host, browser


def stop_tree(proc, mark):
    """Stops a node host's group and whatever it left running (OpenClaw
    leaves its browser behind: node-commands.md §1.7), found by `mark`
    in the command line."""
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait(10)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if mark in open(f"/proc/{entry}/cmdline").read():
                    os.kill(int(entry), 9)
            except OSError:
                pass


def bench_browser(runs, per_run=30):
    import http.server
    import socket
    import threading
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=FIXTURES)
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    page = f"http://127.0.0.1:{site.server_address[1]}/index.html"
    chromium = subprocess.run(["bash", os.path.join(ROOT, "scripts", "chromium.sh")], capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
    tmp = tempfile.mkdtemp(prefix="bench-browser-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        cdp_port = s.getsockname()[1]
    with open(os.path.join(tmp, "oc.json"), "w") as f:
        json.dump({"browser": {"enabled": True, "headless": True, "noSandbox": True, "executablePath": chromium,
                               "ssrfPolicy": {"dangerouslyAllowPrivateNetwork": True},
                               "profiles": {"openclaw": {"cdpPort": cdp_port}}}}, f)
    port = os.environ["OPENCLAW_GATEWAY_URL"].rsplit(":", 1)[1]
    hosts = {
        "clawbot_router node": ("bench-browser-ours", [
            ROUTER, "node", "--display-name", "bench-browser-ours", "--state-dir", f"{tmp}/ours", "--workspace", tmp,
            "--browser", chromium, "--browser-private-network", "--approval", "allow"]),
        "openclaw node run  ": ("bench-browser-openclaw", [
            "env", f"OPENCLAW_STATE_DIR={tmp}/oc-node", f"OPENCLAW_CONFIG_PATH={tmp}/oc.json", "openclaw", "node", "run",
            "--host", "127.0.0.1", "--port", port, "--no-tls", "--display-name", "bench-browser-openclaw"]),
    }

    def start(argv):
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    firsts = {label: [] for label in hosts}
    loops = {label: [] for label in hosts}
    rss = {label: [] for label in hosts}
    running = []  # whatever must stop however this ends

    def stop_all():
        for p in running:
            if p.args[:1] == ["node"]:
                p.kill()
                p.wait()
            else:
                stop_tree(p, tmp)
        running.clear()

    try:
        # Paired once, so each timed start is a known node reconnecting.
        for label, (name, argv) in hosts.items():
            running.append(start(argv))
            found = []
            wait_for(lambda: bool(found.append(pending_request(name)) or found[-1]), step=0.5)
            openclaw("nodes", "approve", found[-1][0])
            time.sleep(3)
            stop_all()
        for _ in range(runs):
            for label, (name, argv) in hosts.items():
                client = subprocess.Popen(["node", BROWSER_BENCH, "first", name, page], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                running.append(client)
                time.sleep(1)  # connected and waiting for "go"
                proc = start(argv)
                running.append(proc)
                out, err = client.communicate("go\n", timeout=180)
                if client.returncode != 0:
                    sys.exit(f"{label}: {err.strip()}")
                firsts[label].append(json.loads(out))
                out = subprocess.run(["node", BROWSER_BENCH, "loop", name, str(per_run)], capture_output=True,
                                     text=True, timeout=600)
                if out.returncode != 0:
                    sys.exit(f"{label}: {out.stderr.strip()}")
                loops[label].append(json.loads(out.stdout))
                time.sleep(2)
                rss[label].append(split_rss_kib(proc.pid))
                stop_all()
                time.sleep(1)
    finally:
        stop_all()
        site.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    for label in hosts:
        f, l, r = firsts[label], loops[label], rss[label]
        print(f"{label}: start → first snapshot " + ", ".join(f"{x['totalMs']/1e3:.2f}" for x in f) + " s "
              f"(open {', '.join(str(round(x['openMs'])) for x in f)} ms, the snapshot after it "
              f"{', '.join(str(round(x['snapshotMs'])) for x in f)} ms)")
        print(f"{label}: snapshot+click p50 " + ", ".join(f"{x['pair']['p50']:.0f}" for x in l) + " ms (snapshot "
              + ", ".join(f"{x['snapshot']['p50']:.0f}" for x in l) + ", click "
              + ", ".join(f"{x['click']['p50']:.0f}" for x in l) + f" ms; {per_run} pairs a run)")
        print(f"{label}: RSS node host " + ", ".join(f"{h/1024:.1f}" for h, _ in r) + " MiB; its browser "
              + ", ".join(f"{b/1024:.0f}" for _, b in r) + " MiB")
    (o, t) = hosts
    ratio = lambda xs, ys: statistics.median(ys) / statistics.median(xs)
    print(f"openclaw node run / ours, medians: start → first snapshot "
          f"{ratio([x['totalMs'] for x in firsts[o]], [x['totalMs'] for x in firsts[t]]):.1f}x; "
          f"snapshot+click {ratio([x['pair']['p50'] for x in loops[o]], [x['pair']['p50'] for x in loops[t]]):.1f}x; "
          f"node host RSS {ratio([h for h, _ in rss[o]], [h for h, _ in rss[t]]):.0f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", type=int, choices=(4, 5, 7, 8, 14), help="run one item only")
    ap.add_argument("--runs", type=int, default=10, help="router calls per path in item 5")
    args = ap.parse_args()
    if "OPENCLAW_GATEWAY_URL" not in os.environ:
        sys.exit('run `scripts/sandbox.sh up` and `eval "$(scripts/sandbox.sh env)"` first')
    if args.only in (None, 4):
        tmp = tempfile.mkdtemp()
        ours = bench_node("clawbot_router node", [ROUTER, "node", "--display-name", "bench-ours", "--state-dir",
                                                  f"{tmp}/ours", "--workspace", tmp], "bench-ours")
        theirs_argv = ["env", f"OPENCLAW_STATE_DIR={tmp}/oc-node", "openclaw", "node", "run", "--host", "127.0.0.1",
                       "--port", os.environ["OPENCLAW_GATEWAY_URL"].rsplit(":", 1)[1], "--no-tls",
                       "--display-name", "bench-openclaw"]
        theirs = bench_node("openclaw node run   ", theirs_argv, "bench-openclaw")
        if "p50" in ours and "p50" in theirs:
            print(f"round-trip ratio (openclaw node run / ours): p50 {theirs['p50']/ours['p50']:.2f}x, "
                  f"p99 {theirs['p99']/ours['p99']:.2f}x")
    if args.only in (None, 5):
        bench_turn(args.runs)
    if args.only in (None, 7):
        bench_published(3)
    if args.only in (None, 8):
        bench_mcp_proxy(3)
    if args.only in (None, 14):
        bench_browser(3)


if __name__ == "__main__":
    main()
