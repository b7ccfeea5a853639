"""Bench item 15: every parser fuzzed for a long run.

`scripts/fuzz all --seconds N` (libFuzzer with AddressSanitizer and leak detection, the corpus grown
in .build/fuzz-corpus/) runs each target for N seconds (default 600, NETCOND_FUZZ_SECONDS to change
it); each target is a row: executions per second, coverage (edges) and corpus size; a crash, a hang
or a leak is a FAIL with the input left in .build/fuzz-artifacts/TARGET/. It takes 80 minutes at the
default, so it runs only when asked (`scripts/bench --only 15`).
"""
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def item_fuzz(h, t):
    name = "15. fuzzing"
    if not h.only or "15" not in h.only:
        t.add(name, "not run (takes 80 minutes: scripts/bench --only 15 --no-build)", "-", "SKIP")
        return
    seconds = int(os.environ.get("NETCOND_FUZZ_SECONDS", "600"))
    targets = subprocess.run([os.path.join(ROOT, "scripts", "fuzz"), "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for target in targets:
        label = f"{name}: {target}, {seconds} s"
        r = subprocess.run([os.path.join(ROOT, "scripts", "fuzz"), target, "--seconds", str(seconds)],
                           cwd=ROOT, capture_output=True, text=True, timeout=seconds + 1800)
        row = re.search(rf"^\| {re.escape(target)} \| (\w+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", r.stdout, re.M)
        if not row:
            t.add(label, f"no result (exit {r.returncode}): {(r.stderr or r.stdout)[-200:]}", "no crash, hang or leak", "ERROR")
            continue
        verdict, execs, coverage, corpus = (part.strip() for part in row.groups())
        measured = f"{execs} executions/s, coverage {coverage} edges, corpus {corpus}"
        if verdict != "ok":
            measured += "; " + (r.stderr.strip().splitlines() or ["failed"])[-1][:160]
        t.add(label, measured, "no crash, hang or leak", "PASS" if verdict == "ok" and r.returncode == 0 else "FAIL")
