#!/usr/bin/env python3
"""Does `toolrun test` scale with cores? (issue 14; not run in CI: timings depend on the machine)

    python3 benches/test_jobs.py [RUNS] [CASES]

Generates a spec with CASES (default 10,000) scripted test cases — the stock assistant's tools
and scripted model, four kinds of question (tool calls, the calculator, a fallback answer) — and
runs `toolrun test --jobs 1` and `--jobs 2` on it RUNS times each (default 7), interleaved so a
busy neighbour slows both alike. Prints the median wall time, the CPU time (user + system) and
the speed-up, and, for the part that cannot scale, the time of a run that reads and compiles the
same spec but runs one case (`--filter case_0`).
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import cases_spec  # noqa: E402  (the same generated spec)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "toolrun")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
CASES = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000


def timed(args, env=None):
    """Wall time and CPU time (user + system), in ms, of one process run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args[:4])} ... failed ({result.returncode}): {result.stderr.decode()[:500]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="toolrun-bench-jobs-")
    try:
        path = os.path.join(work, "cases.yaml")
        with open(path, "w") as f:
            f.write(cases_spec(CASES))
        # Runs of this spec skip the schema checks they already passed, as users' runs do.
        env = dict(os.environ, TOOLRUN_CACHE_DIR=os.path.join(work, "cache"))
        timed([BIN, "test", path, "--jobs", "1"], env)
        samples = {1: [], 2: []}
        for _ in range(RUNS):
            for jobs in samples:
                samples[jobs].append(timed([BIN, "test", path, "--jobs", str(jobs)], env))
        serial = [timed([BIN, "test", path, "--filter", "case_0"], env)[0] for _ in range(3)]
        print(f"`toolrun test`, {CASES:,} scripted cases, {RUNS} runs each, medians:")
        for jobs, runs in samples.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"  --jobs {jobs}: wall {wall:8.1f} ms (min {min(w for w, _ in runs):8.1f})   cpu {cpu:8.1f} ms")
        one = statistics.median(w for w, _ in samples[1])
        two = statistics.median(w for w, _ in samples[2])
        print(f"  speed-up --jobs 2 over --jobs 1: {one / two:.2f}x")
        print(f"  reading and compiling the spec, one case (the serial part): median {statistics.median(serial):.1f} ms")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
