#!/usr/bin/env python3
"""Item 6: what TLS costs, against the real OpenClaw. Two sandboxes must be
up — the plain one and a wss:// one — and `cargo build --release` done:

    scripts/sandbox.sh up
    CLAWBOT_SANDBOX_DIR=/tmp/clawbot-bench-tls CLAWBOT_SANDBOX_PORT=19889 \\
      CLAWBOT_SANDBOX_MODEL_PORT=19556 CLAWBOT_SANDBOX_TLS=1 scripts/sandbox.sh up
    python3 scripts/bench_tls.py [--runs N]

Side by side, interleaved, the same number of runs each:
- node start → hello-ok ("connected to" on stderr), ws:// vs wss:// (each
  with a state directory already paired, as a service restarts);
- router `--via gateway -a nosuchagent` (start, connect, handshake, one
  refusal: the router's own share), ws:// vs wss://;
- router `--via gateway` one turn with the instant fake model, ws:// vs wss://.
Prints medians (and min–max); asserts nothing.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTER = os.path.join(ROOT, "target", "release", "clawbot_router")
SANDBOX = os.path.join(ROOT, "scripts", "sandbox.sh")


def sandbox_env(extra):
    env = dict(os.environ, **extra)
    text = subprocess.run([SANDBOX, "env"], env=env, capture_output=True, text=True, check=True).stdout
    out = dict(os.environ)
    for line in text.splitlines():
        line = line.removeprefix("export ")
        for word in line.split(" "):
            if "=" in word:
                key, value = word.split("=", 1)
                out[key] = value.strip('"').replace("$PATH", os.environ["PATH"])
    return out


def node_connect(env, state, exe=ROUTER, then=None):
    """Seconds from spawn to the node's "connected to" line; with `then`,
    also what `then(pid)` says of the node still running (bench_dist.py)."""
    os.makedirs(os.path.join(state, "ws"), exist_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [exe, "node", "--state-dir", state, "--workspace", os.path.join(state, "ws")],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = None
    for line in proc.stderr:
        if "connected to" in line:
            took = time.perf_counter() - start
            break
    seen = then(proc.pid) if then else None
    proc.terminate()
    proc.wait(timeout=20)
    return (took, seen) if then else took


def router(env, *args):
    start = time.perf_counter()
    subprocess.run([ROUTER, "--via", "gateway", "--timeout", "60", *args], env=env,
                   stdin=subprocess.DEVNULL, capture_output=True, check=False)
    return time.perf_counter() - start


def show(label, ws, wss, unit=1000, suffix="ms"):
    med = lambda xs: statistics.median(xs) * unit
    print(f"{label:<55} ws {med(ws):8.1f} {suffix} ({min(ws)*unit:.1f}–{max(ws)*unit:.1f})"
          f"   wss {med(wss):8.1f} {suffix} ({min(wss)*unit:.1f}–{max(wss)*unit:.1f})"
          f"   wss/ws {med(wss)/med(ws):.2f}×")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    plain = sandbox_env({})
    tls = sandbox_env({"CLAWBOT_SANDBOX_DIR": os.environ.get("BENCH_TLS_DIR", "/tmp/clawbot-bench-tls"),
                       "CLAWBOT_SANDBOX_PORT": "19889", "CLAWBOT_SANDBOX_TLS": "1"})
    assert tls["OPENCLAW_GATEWAY_URL"].startswith("wss://"), tls["OPENCLAW_GATEWAY_URL"]
    with tempfile.TemporaryDirectory() as tmp:
        states = {"ws": os.path.join(tmp, "ws"), "wss": os.path.join(tmp, "wss")}
        # Pair each once (loopback pairs silently), then measure restarts.
        node_connect(plain, states["ws"])
        node_connect(tls, states["wss"])
        results = {k: ([], []) for k in ("node", "refusal", "turn")}
        for i in range(args.runs):
            for side, env in ((0, plain), (1, tls)):
                state = states["ws" if side == 0 else "wss"]
                results["node"][side].append(node_connect(env, state))
                results["refusal"][side].append(router(env, "-a", "nosuchagent", "-m", "x"))
                results["turn"][side].append(router(env, "-m", f"bench {i}"))
    print(f"{args.runs} runs each, interleaved")
    show("node start → hello-ok", *results["node"])
    show("router --via gateway, refusal (start+connect+handshake)", *results["refusal"])
    show("router --via gateway, one turn", *results["turn"])


if __name__ == "__main__":
    main()
