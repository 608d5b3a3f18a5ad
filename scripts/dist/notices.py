#!/usr/bin/env python3
"""THIRD-PARTY.md for one target's archive (scripts/dist.sh): every crate
linked into its executables (cargo's normal dependencies for that
platform, from the lock file), its version and license, then each license
or notice text those crates ship, once per distinct text, naming the
crates it comes from; then what the toolchain links in besides.

    notices.py TARGET > THIRD-PARTY.md
"""
import json
import os
import subprocess
import sys

NOTICE_PREFIXES = ("license", "licence", "copying", "notice", "copyright", "unlicense")


def main(target):
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", target],
        check=True, capture_output=True, text=True).stdout)
    by_name = {(p["name"], p["version"]): p for p in meta["packages"]}
    # What the executables link: cargo's own answer for that platform —
    # normal dependencies with the features the build turns on, no proc
    # macro, no build or dev dependency (cargo metadata's resolve would
    # add what the dev-dependencies' features pull in).
    tree = subprocess.run(
        ["cargo", "tree", "--locked", "--target", target, "-e", "normal,no-proc-macro",
         "--prefix", "none", "-f", "{p}"],
        check=True, capture_output=True, text=True).stdout
    linked = set()
    for line in tree.splitlines():
        words = line.replace(" (*)", "").split()
        if len(words) >= 2 and words[1].startswith("v"):
            linked.add((words[0], words[1][1:]))
    root = next(p for p in meta["packages"] if p["id"] == meta["resolve"]["root"])
    linked.discard((root["name"], root["version"]))
    missing = sorted(k for k in linked if k not in by_name)
    if missing:
        sys.exit(f"notices.py: cargo tree names packages cargo metadata does not: {missing}")
    crates = sorted((by_name[k] for k in linked), key=lambda p: (p["name"], p["version"]))

    out = [f"# Third-party software in clawbot_router for {target}\n",
           "clawbot_router itself is under the MIT license (LICENSE). Its executables "
           "link these crates from crates.io:\n",
           "| crate | version | license |", "| --- | --- | --- |"]
    texts = {}
    for p in crates:
        out.append(f"| {p['name']} | {p['version']} | {p.get('license') or 'see its license file'} |")
        folder = os.path.dirname(p["manifest_path"])
        names = sorted(f for f in os.listdir(folder)
                       if f.lower().startswith(NOTICE_PREFIXES) and os.path.isfile(os.path.join(folder, f)))
        if p.get("license_file"):
            names.append(p["license_file"])
        for name in dict.fromkeys(names):
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.setdefault(f.read().strip(), []).append(f"{p['name']} {p['version']} ({name})")

    out += ["", "Built by the Rust compiler, whose standard library (MIT OR Apache-2.0) is linked in."]
    if "windows" in target:
        out.append("The mingw-w64 runtime (its own permissive licenses, as Debian's mingw-w64 "
                   "package states) and libgcc (GPL-3.0 with the GCC Runtime Library Exception) "
                   "are linked in.")
    else:
        out.append("The GNU C Library (LGPL-2.1-or-later) and libgcc (GPL-3.0 with the GCC Runtime "
                   "Library Exception) are linked in statically. The source of this program is "
                   "public at the commit `--version` names, so the program can be relinked against "
                   "another glibc, as the LGPL asks; its text follows at the end.")
    out += ["", "## License and notice texts", ""]
    for text, owners in sorted(texts.items(), key=lambda t: t[1][0]):
        out += ["### " + ", ".join(owners), "", "```", text.replace("```", "'''"), "```", ""]
    lgpl = "/usr/share/common-licenses/LGPL-2.1"
    if "windows" not in target:
        if not os.path.isfile(lgpl):
            sys.exit(f"notices.py: no {lgpl} (Debian's base-files) for glibc's license")
        with open(lgpl, encoding="utf-8") as f:
            out += ["### The GNU C Library: LGPL-2.1", "", "```", f.read().strip(), "```", ""]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: notices.py TARGET")
    main(sys.argv[1])
