#!/usr/bin/env python3
"""`toolrun serve --http --record`: what recording a call costs as the recording grows, and what
its replay costs (not run in CI: timings depend on the machine). Standard library only:

    python3 benches/record_bench.py [CALLS] [BUCKET]

One client on one keep-alive connection makes CALLS `tools/call`s of a built-in calculator
(default 50,000) in one session of a server started with `--record`. Per BUCKET calls (default
10,000) it reports the wall time a call took and the server's CPU a call (utime + stime from
/proc/PID/stat, which a loaded machine inflates less than wall time). A recording that costs a
constant per call shows flat buckets (it used to grow: 214 µs a call at 0-10k, 2,750 µs at
30-40k). The server is then killed (SIGKILL): the recording on disk must hold every call
answered; `toolrun replay` of it is timed, with its CPU, for linearity. TOOLRUN_BIN names the
binary (default target/release/toolrun; a debug build works, slower).
"""
import http.client
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("TOOLRUN_BIN", os.path.join(TARGET, "release", "toolrun"))
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
BUCKET = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
TICKS = os.sysconf("SC_CLK_TCK")

SPEC = """version: 1
name: calc
tools:
  calculate:
    description: Arithmetic.
    kind: builtin
    builtin: calculator
serve: { max_tool_calls: 10000000, max_repeated_calls: 10000000 }
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def post(conn, body, session=None):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2025-11-25",
    }
    if session:
        headers["Mcp-Session-Id"] = session
    conn.request("POST", "/mcp", json.dumps(body), headers)
    resp = conn.getresponse()
    data = resp.read()
    return resp, data


def main():
    work = tempfile.mkdtemp(prefix="toolrun-record-bench-")
    spec = os.path.join(work, "calc.yaml")
    with open(spec, "w") as f:
        f.write(SPEC)
    recording = os.path.join(work, "calls.jsonl")
    server = subprocess.Popen(
        [BIN, "serve", spec, "--http", "127.0.0.1:0", "--record", recording],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    line = server.stderr.readline()
    addr = line.split("http://", 1)[1].split("/mcp", 1)[0]
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    resp, _ = post(conn, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "record-bench", "version": "1"}}})
    session = resp.getheader("mcp-session-id")
    post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    print(f"{'calls':>15}  {'wall µs/call':>12}  {'server CPU µs/call':>18}")
    start_wall, start_cpu = time.perf_counter(), cpu_seconds(server.pid)
    for i in range(1, CALLS + 1):
        resp, data = post(conn, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "calculate", "arguments": {"expression": f"{i}+1"}}}, session)
        if resp.status != 200:
            sys.exit(f"call {i}: HTTP {resp.status} {data[:200]!r}")
        if i % BUCKET == 0:
            wall, cpu = time.perf_counter(), cpu_seconds(server.pid)
            print(f"{i - BUCKET:>7}-{i:<7}  {(wall - start_wall) / BUCKET * 1e6:>12.1f}"
                  f"  {(cpu - start_cpu) / BUCKET * 1e6:>18.1f}")
            start_wall, start_cpu = wall, cpu
    server.send_signal(signal.SIGKILL)
    server.wait()
    with open(recording) as f:
        served = sum(1 for l in f if '"kind":"served"' in l)
    print(f"killed: the recording holds {served} of {CALLS} calls "
          f"({os.path.getsize(recording) / 1e6:.1f} MB)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([BIN, "replay", recording, "--spec", spec],
                         capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"replay: exit {out.returncode} in {elapsed:.1f} s "
          f"({elapsed / max(served, 1) * 1e6:.0f} µs a call), "
          f"CPU {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.1f} s, "
          f"peak RSS {after.ru_maxrss / 1024:.0f} MB (the larger of the server's and the replay's)")
    print(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:])


if __name__ == "__main__":
    main()
