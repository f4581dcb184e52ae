#!/usr/bin/env python3
"""`toolrun serve --http` under the official MCP Python client (not run in CI: timings depend on
the machine). Run it with the venv the interop tests make (tests/mcp/setup.sh):

    bash tests/mcp/setup.sh target/tmp/mcp-venv
    target/tmp/mcp-venv/bin/python benches/serve_bench.py [CALLS] [CONCURRENCY]

Reports: start-up (process start to the listening line), per-call latency percentiles for
sequential and concurrent `tools/call`s, server CPU per call (from /proc, user + system), and the
server's peak RSS (VmHWM). The tool is the in-process calculator, so the numbers are serve's own overhead.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
from mcp import Client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("TOOLRUN_BIN", os.path.join(TARGET, "release", "toolrun"))
SPEC_TEXT = """version: 1
name: serve_bench
tools:
  calculate: { description: Evaluates an arithmetic expression., kind: builtin, builtin: calculator }
limits: { max_tool_calls: 1000000 }
"""
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 500
CONCURRENCY = int(sys.argv[2]) if len(sys.argv) > 2 else 8
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentiles(samples):
    s = sorted(samples)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] * 1000
    return f"p50 {pick(0.50):.2f} ms  p90 {pick(0.90):.2f} ms  p99 {pick(0.99):.2f} ms"


async def drive(url):
    # Distinct arguments per call: loop detection would stop identical ones (as in a run).
    args = lambda i: {"expression": f"{i} + 1"}
    async with Client(url) as client:
        await client.list_tools()
        seq = []
        for i in range(CALLS):
            t = time.perf_counter()
            await client.call_tool("calculate", args(i))
            seq.append(time.perf_counter() - t)
        conc = []

        async def worker(k):
            for i in range(k, CALLS, CONCURRENCY):
                t = time.perf_counter()
                await client.call_tool("calculate", args(CALLS + i))
                conc.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for k in range(CONCURRENCY):
                tg.start_soon(worker, k)
        return seq, conc, time.perf_counter() - t0


def main():
    if not os.path.exists(BIN):
        sys.exit(f"build the release binary first: cargo build --release ({BIN})")
    spec = os.path.join(tempfile.mkdtemp(prefix="serve-bench-"), "spec.yaml")
    with open(spec, "w") as f:
        f.write(SPEC_TEXT)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [BIN, "serve", spec, "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stderr.readline()
    startup = (time.perf_counter() - started) * 1000
    url = next(w for w in line.split() if w.startswith("http://"))
    try:
        cpu_before = cpu_seconds(proc.pid)
        seq, conc, wall = anyio.run(drive, url)
        cpu = cpu_seconds(proc.pid) - cpu_before
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    total = len(seq) + len(conc)
    print(f"start-up (to listening)   {startup:.1f} ms")
    print(f"sequential, {len(seq)} calls   {percentiles(seq)}")
    print(f"concurrent x{CONCURRENCY}, {len(conc)} calls  {percentiles(conc)}  ({len(conc) / wall:.0f} calls/s)")
    print(f"server CPU per call       {cpu / total * 1e6:.0f} us (tick {1000 / TICKS:.0f} ms; {total} calls)")
    print(f"server peak RSS           {rss:.1f} MB")
    print(f"mean sequential latency   {statistics.mean(seq) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
