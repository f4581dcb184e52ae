#!/usr/bin/env python3
"""Tests from data (issue 33 §5): how long a data file of scripted cases takes to run, next to the
same cases written out as YAML tests. (Not run in CI: timings depend on the machine.)

    python3 benches/data_tests.py [RUNS] [ROWS]
    TOOLRUN_BIN=target/debug/toolrun python3 benches/data_tests.py   # a binary already built

Generates a spec whose one test has `from: data/cases.csv` with ROWS rows (default 1,000), each a
price question the scripted model answers with a tool call and an answer, and a spec with the same
ROWS tests written out. Runs `toolrun test` on each RUNS times (default 7), interleaved so a busy
neighbour slows both alike, and prints the median wall and CPU time (user + system). Then reads a
100,000-row file with `--sample 100` and prints its CPU time and peak memory (the rows are read
one at a time; every row is compiled, 100 run).
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("TOOLRUN_BIN") or os.path.join(TARGET, "release", "toolrun")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000

HEAD = """version: 1
name: data_bench
default_model: scripted
tools:
  get_stock_price:
    description: Returns the simulated current price for a ticker symbol.
    kind: mock
    input: { type: object, properties: { ticker: { type: string } }, required: [ticker] }
    responses:
      - when: { ticker: AAPL }
        result: 178.15
      - when: { ticker: MSFT }
        result: 411.2
      - result: 1
models:
  scripted:
    kind: scripted
    scripts:
      - when: "(?i)price of (?P<t>[A-Z0-9]+)"
        turns:
          - tool_calls: [{ name: get_stock_price, arguments: { ticker: "{{ query | replace('What is the price of ', '') | replace('?', '') }}" } }]
          - answer: "The price is {{ last.result }}."
tests:
"""

DATA_TEST = """  - name: "case_{{ row.id }}"
    from: data/cases.csv
    query: "What is the price of {{ row.ticker }}?"
    expect:
      status: ok
      tool_calls: [get_stock_price]
      output_contains: "{{ row.price }}"
"""


def rows(n):
    tickers = [("AAPL", "178.15"), ("MSFT", "411.2")]
    return [(i, *tickers[i % 2]) for i in range(n)]


def write_csv(path, n):
    with open(path, "w") as f:
        f.write("id,ticker,price\n")
        for i, t, p in rows(n):
            f.write(f"{i},{t},{p}\n")


def written_spec(n):
    out = [HEAD]
    for i, t, p in rows(n):
        out.append(
            f"  - name: case_{i}\n    query: \"What is the price of {t}?\"\n    expect:\n"
            f"      status: ok\n      tool_calls: [get_stock_price]\n      output_contains: \"{p}\"\n"
        )
    return "".join(out)


def timed(args, env):
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


def peak_kb(args, env):
    """Peak RSS of one run, in KB, by GNU time (None where it is missing)."""
    if not os.path.exists("/usr/bin/time"):
        return None
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    return int(out.stderr.decode().strip().splitlines()[-1])


def main():
    if "TOOLRUN_BIN" not in os.environ:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    work = tempfile.mkdtemp(prefix="toolrun-bench-data-")
    try:
        os.makedirs(os.path.join(work, ".git"))
        os.makedirs(os.path.join(work, "data"))
        write_csv(os.path.join(work, "data", "cases.csv"), ROWS)
        data = os.path.join(work, "data.yaml")
        with open(data, "w") as f:
            f.write(HEAD + DATA_TEST)
        written = os.path.join(work, "written.yaml")
        with open(written, "w") as f:
            f.write(written_spec(ROWS))
        # Runs of a spec skip the schema checks it already passed, as users' runs do.
        env = dict(os.environ, TOOLRUN_CACHE_DIR=os.path.join(work, "cache"))
        samples = {"from: data": [], "written out": []}
        for spec in (data, written):
            timed([BIN, "test", spec], env)
        for _ in range(RUNS):
            for label, spec in (("from: data", data), ("written out", written)):
                samples[label].append(timed([BIN, "test", spec], env))
        print(f"`toolrun test`, {ROWS:,} scripted cases, {RUNS} runs each, medians ({BIN}):")
        for label, runs in samples.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"  {label:12} wall {wall:7.1f} ms   cpu {cpu:7.1f} ms")

        write_csv(os.path.join(work, "data", "cases.csv"), 100_000)
        args = [BIN, "test", data, "--sample", "100", "--seed", "1"]
        _, cpu = timed(args, env)
        peak = peak_kb(args, env)
        size = os.path.getsize(os.path.join(work, "data", "cases.csv")) / 1e6
        print(f"100,000 rows ({size:.1f} MB), --sample 100: cpu {cpu:.0f} ms"
              + (f", peak RSS {peak / 1024:.0f} MB" if peak else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
