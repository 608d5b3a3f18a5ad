#!/usr/bin/env python3
"""Item 16: the release archives (scripts/dist.sh), side by side. Needs the
archives in target/dist (or --dist DIR), qemu-user registered for the ARM
ones (scripts/dist-test.sh does it) and a sandbox up:

    scripts/dist.sh && scripts/sandbox.sh up
    python3 scripts/bench_dist.py [--runs N]

Prints, for every archive there: its size and its executables' sizes; then
for every Linux one, interleaved, the same number of runs each: the node's
start → hello-ok ("connected to" on stderr, a state directory already
paired, as a service restarts) and its resident memory a second after
(VmRSS, and VmHWM, the peak). Under qemu-user these include the emulator
and its translated code: indicative only. Asserts nothing.
"""
import argparse
import glob
import os
import statistics
import tarfile
import tempfile
import time
import zipfile

from bench_tls import node_connect, sandbox_env  # one node start; the sandbox's exports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def node(exe, env, state):
    """Seconds from spawn to "connected to", and VmRSS/VmHWM (KiB) a second later."""
    def memory(pid):
        time.sleep(1)
        return status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
    took, (rss, hwm) = node_connect(env, state, exe=exe, then=memory)
    return took, rss, hwm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dist", default=os.path.join(ROOT, "target", "dist"))
    args = ap.parse_args()
    archives = sorted(glob.glob(os.path.join(args.dist, "clawbot_router-*.tar.gz"))
                      + glob.glob(os.path.join(args.dist, "clawbot_router-*.zip")))
    print(f"{'archive':<62} {'KiB':>7}   executables (KiB)")
    for path in archives:
        if path.endswith(".tar.gz"):
            with tarfile.open(path) as t:
                exes = {m.name.rsplit("/", 1)[1]: m.size for m in t.getmembers() if m.mode & 0o111 and m.isfile()}
        else:
            with zipfile.ZipFile(path) as z:
                exes = {i.filename.rsplit("/", 1)[1]: i.file_size for i in z.infolist() if i.filename.endswith(".exe")}
        sizes = ", ".join(f"{k} {v // 1024}" for k, v in sorted(exes.items()))
        print(f"{os.path.basename(path):<62} {os.path.getsize(path) // 1024:>7}   {sizes}")

    env = sandbox_env({})
    with tempfile.TemporaryDirectory() as tmp:
        builds = {}
        for path in archives:
            if not path.endswith(".tar.gz"):
                continue
            target = os.path.basename(path)[len("clawbot_router-"):-len(".tar.gz")].split("-", 1)[1]
            with tarfile.open(path) as t:
                t.extractall(os.path.join(tmp, target), filter="tar")
            (folder,) = glob.glob(os.path.join(tmp, target, "clawbot_router-*"))
            builds[target] = os.path.join(folder, "clawbot_router")
        states = {t: os.path.join(tmp, "state-" + t) for t in builds}
        for target, exe in builds.items():
            node(exe, env, states[target])  # pairs (loopback pairs silently)
        results = {t: [] for t in builds}
        for _ in range(args.runs):
            for target, exe in builds.items():
                results[target].append(node(exe, env, states[target]))
    print(f"\nnode start → hello-ok and memory 1 s later, {args.runs} runs each, interleaved")
    median_ms = {t: statistics.median(r[0] for r in runs if r[0] is not None) * 1000
                 for t, runs in results.items()}
    base = median_ms.get("x86_64-unknown-linux-gnu") or next(iter(median_ms.values()))
    for target, runs in results.items():
        took = [r[0] for r in runs if r[0] is not None]
        med = median_ms[target]
        rss = statistics.median(r[1] for r in runs) / 1024
        hwm = statistics.median(r[2] for r in runs) / 1024
        print(f"{target:<34} {med:8.1f} ms ({min(took)*1000:.1f}–{max(took)*1000:.1f}, {med / base:.1f}× native x86_64)"
              f"   VmRSS {rss:.1f} MiB, VmHWM {hwm:.1f} MiB")


if __name__ == "__main__":
    main()
