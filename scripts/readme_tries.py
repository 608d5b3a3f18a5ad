#!/usr/bin/env python3
"""Runs the README's link tries as they are written and checks their answers.

The README's "Trying the links" and each link's "Try it" are ```bash blocks
marked `<!-- try: NAME -->`. They are meant to be pasted into one shell in
order, so they run here as one bash script (each block's stdout kept apart),
from the repository, after the sandbox's install (`scripts/sandbox.sh up` or
the demo: Node 24 is in the cache). The link services run in a sandbox
directory of this run's own (so a sandbox that runs is left alone) and are
stopped at the end; `mktemp` lands there too.

What each block printed is then checked against what the README shows
after it. A block missing from the README fails, so a try cannot silently
stop being tested. CI runs this after the demo (.ci/run), whose release
build the setup block's `cargo build --release` reuses.

Usage: scripts/readme_tries.py   (prints each block's time on stderr)
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["setup", "bridge", "chat", "chat_memory", "poll"]
NOTES = "hello from this machine\n"


def blocks(readme):
    """The marked blocks, in the README's order: [(name, text)]."""
    found = []
    for m in re.finditer(r"^<!-- try: (\w+) -->\n```bash\n(.*?)^```$", readme, re.M | re.S):
        found.append((m.group(1), m.group(2)))
    return found


def script(found, out):
    lines = ["set -euo pipefail"]
    for name, text in found:
        lines.append(f'echo "{name} $(date +%s.%N)" >>"{out}/times"')
        lines.append(f'exec >"{out}/{name}.out"')
        lines.append(text)
    lines.append(f'echo "end $(date +%s.%N)" >>"{out}/times"')
    lines.append(f'echo "$try" >"{out}/try"')
    return "\n".join(lines) + "\n"


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith(("{", "["))]


def check_bridge(text, _try):
    frames = json_lines(text)
    kinds = [f.get("type") for f in frames]
    assert kinds == ["send_ack", "hello_ack", "inbound_message", "tool_result", "tool_result"], kinds
    ack, hello, inbound, read, write = frames
    assert ack["delivered"] is False and ack["buffered"] == 1, ack
    assert "read_file" in hello["tools"] and hello["session_meta"]["buffered"] == 1, hello
    assert inbound["content"] == "a message for the session", inbound
    assert read["ok"] is True and read["result"]["content"] == NOTES, read
    assert write["ok"] is False and write["error"].startswith("USER_REJECTED"), write


def check_chat(text, _try):
    lines = text.splitlines()
    assert lines[0] == "Hello, world", lines
    results = [json.loads(line[len("RESULT "):]) for line in lines if line.startswith("RESULT ")]
    assert len(results) == 2, lines
    read, write = results
    assert read["ok"] is True and read["result"]["content"] == NOTES, read
    assert write["ok"] is False and write["error"].startswith("USER_REJECTED"), write
    assert lines[3:] == [
        "saved to long-term memory: memory/MEMORY.md",
        '1 result for "tea":',
        "memory/MEMORY.md:1 (score 1)",
        "    I take my tea green.",
    ], lines


def check_chat_memory(text, _try):
    written, found = json_lines(text)
    today = time.strftime("memory/%Y-%m-%d.md", time.gmtime())
    assert written == {"general_session_id": "g_1", "ok": True, "path": today, "target": "daily"}, written
    assert found["ok"] is True and found["query"] == "script", found
    assert found["results"] == [{"excerpt": "Tried the memory from a script.", "line_end": 1,
                                 "line_start": 1, "path": today, "score": 1.0}], found


def check_poll(text, try_dir):
    completed = {c["id"]: c for c in json_lines(text)[-1]}
    assert completed["c1"]["success"] is True and completed["c1"]["output"] == NOTES, completed
    assert completed["c2"]["success"] is True, completed
    with open(os.path.join(try_dir, "from-the-queue.txt")) as f:
        assert f.read() == "written by the queue"


CHECKS = {"setup": lambda text, _try: None, "bridge": check_bridge, "chat": check_chat,
          "chat_memory": check_chat_memory, "poll": check_poll}


def main():
    with open(os.path.join(ROOT, "README.md")) as f:
        found = blocks(f.read())
    names = [name for name, _ in found]
    if names != NAMES:
        sys.exit(f"readme_tries: the README's marked tries are {names}, expected {NAMES}")
    base = tempfile.mkdtemp(prefix="clawbot-readme-tries-")
    out = os.path.join(base, "out")
    os.mkdir(out)
    env = dict(os.environ, CLAWBOT_SANDBOX_DIR=os.path.join(base, "sandbox"), TMPDIR=base)
    failed = None
    proc = subprocess.Popen(["bash", "-c", script(found, out)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        code = proc.wait(timeout=900)
        if code != 0:
            failed = f"the tries' script exited {code}"
    except subprocess.TimeoutExpired:
        failed = "the tries did not finish in 15 minutes"
    finally:
        # Whatever a block left running (the bridge, if its block failed).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        subprocess.run([os.path.join(ROOT, "scripts", "sandbox.sh"), "down"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if os.path.exists(os.path.join(out, "times")):
            times = [line.split() for line in open(os.path.join(out, "times"))]
            spans = [f"{a} {float(tb) - float(ta):.1f} s" for (a, ta), (_, tb) in zip(times, times[1:])]
            print("readme_tries: " + ", ".join(spans), file=sys.stderr)
        try_dir = open(os.path.join(out, "try")).read().strip() if not failed else ""
        for name in NAMES:
            path = os.path.join(out, f"{name}.out")
            text = open(path).read() if os.path.exists(path) else ""
            if failed:
                print(f"--- {name}: stdout\n{text}", file=sys.stderr)
                continue
            try:
                CHECKS[name](text, try_dir)
            except (AssertionError, LookupError, ValueError, OSError) as e:
                failed = f"the {name} try printed what the README does not say: {e!r}\n--- its stdout\n{text}"
                break
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if failed:
        sys.exit(f"readme_tries: {failed}")
    print("readme_tries: every link try answered as the README says", file=sys.stderr)


if __name__ == "__main__":
    main()
