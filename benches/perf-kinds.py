#!/usr/bin/env python3
"""Where a launch's slurmstepd CPU goes, by kind, from `perf record -a -g` of whole launches
(benches/account.sh with TFC_ACCOUNT_PERF=1 writes one perf.data per launch, named
MODE-N.data): benches/perf-kinds.py DIR [BASE]

Each sample of a process named slurmstepd (a step's slurmstepd, and each task it forks until the
task's exec) is put in one kind: the system call its kernel stack entered by (fork: `clone`;
exec, split into the kernel's scan of the environment's strings, their copy onto the new
program's stack and the rest, which is mostly tearing down the forked copy of slurmstepd), a
page fault, or user code by library. Printed: a Markdown table of each kind's CPU per node and
launch, in ms (samples / frequency / nodes, the mean over a mode's launches), one column per
mode, then each mode's difference from BASE (default `floor`). The sampling frequency and node
count are the bench's (999 Hz, 64 nodes).
"""

import collections
import glob
import os
import re
import subprocess
import sys

HZ = 999
NODES = 64
SYSCALL = re.compile(r"__(?:x64|se|do)_sys_(\w+)")
# The kernel's functions that bring the environment's strings into the new program: measuring
# each string (strnlen_user, a read of the old memory: its own row), and copying it onto the
# new stack's pages. A local function's name may carry a suffix (`copy_strings.isra.0`).
SCAN = "strnlen_user"
ENVIRONMENT = ("get_arg_page", "copy_strings", SCAN)
KINDS = [
    ("fork of each task (`clone`)", lambda k: k == "sys:clone"),
    ("exec: the environment's strings scanned (`strnlen_user`)",
     lambda k: k == "sys:execve:scan"),
    ("exec: the environment copied onto the new stack", lambda k: k == "sys:execve:environment"),
    ("exec: the rest (the forked copy torn down)", lambda k: k == "sys:execve"),
    ("page faults", lambda k: k.startswith("fault")),
    ("netlink (`sendto`: socket diagnostics, nftables)", lambda k: k == "sys:sendto"),
    ("tfcluster's own code", lambda k: k == "user:libtfcluster.so"),
    ("libnftables' code", lambda k: k.startswith("user:libnftables")),
    ("libc's code", lambda k: k == "user:libc.so.6"),
    ("Slurm's code", lambda k: k in ("user:libslurmfull.so", "user:slurmstepd-wlm", "user:slurmstepd")),
    ("every other system call and library", lambda k: True),
]


def kind(frames):
    """frames: (symbol, object) pairs, innermost first."""
    kernel = [sym for sym, obj in frames if "kernel" in obj]
    if not kernel:
        return "user:" + (os.path.basename(frames[0][1]) if frames else "?")
    for i in range(len(kernel) - 1, -1, -1):
        call = SYSCALL.search(kernel[i])
        if call:
            name = call.group(1)
            inner = [s.split(".")[0] for s in kernel[:i]]
            if name == "execve" and inner and inner[0] == SCAN:
                return "sys:execve:scan"
            if name == "execve" and any(s in ENVIRONMENT for s in inner):
                return "sys:execve:environment"
            return "sys:" + name
    if any("page_fault" in sym for sym in kernel):
        return "fault"
    return "kernel:other"


def samples(path):
    out = subprocess.run(
        ["perf", "script", "-i", path, "--comms", "slurmstepd", "-F", "comm,ip,sym,dso"],
        capture_output=True, text=True, check=True,
    ).stdout
    counts, frames = collections.Counter(), None
    for line in out.splitlines() + [""]:
        if not line.strip():
            if frames is not None:
                counts[kind(frames)] += 1
            frames = None
            continue
        if frames is None:
            frames = []
            continue
        m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            frames.append((m.group(1), m.group(2)))
    return counts


def main():
    directory = sys.argv[1]
    base = sys.argv[2] if len(sys.argv) > 2 else "floor"
    files = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(directory, "*.data"))):
        files[os.path.basename(path).rsplit("-", 1)[0]].append(path)
    modes = sorted(files, key=lambda m: (m == base, m))
    per_node = {}
    for mode in modes:
        total = collections.Counter()
        for path in files[mode]:
            total.update(samples(path))
        rows = collections.Counter()
        for k, n in total.items():
            label = next(label for label, test in KINDS if test(k))
            rows[label] += n
        per_node[mode] = {l: rows[l] / len(files[mode]) / HZ * 1000 / NODES for l, _ in KINDS}
    others = [m for m in modes if m != base]
    head = [f"{m} ({len(files[m])})" for m in modes] + [f"{m} - {base}" for m in others]
    print("| slurmstepd's CPU per node and launch, ms (launches) | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    for label, _ in KINDS + [("**all**", None)]:
        value = (lambda m: sum(per_node[m].values())) if label == "**all**" else (lambda m: per_node[m][label])
        cells = [f"{value(m):.1f}" for m in modes] + [f"{value(m) - value(base):+.1f}" for m in others]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
