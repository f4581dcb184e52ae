#!/usr/bin/env python3
"""`toolrun serve --http` and mcp-toolbox (the Go peer), side by side, under the official MCP Python
client (not run in CI: timings depend on the machine). Run it with the venv the interop tests make
(tests/mcp/setup.sh):

    bash tests/mcp/setup.sh target/tmp/mcp-venv
    target/tmp/mcp-venv/bin/python benches/serve_bench.py [CALLS] [ROUNDS]

Both servers serve the same HTTP tool: GET a local httpbin-like `/get?ticker=` on 127.0.0.1 (a
keep-alive HTTP/1.1 server this script starts in its own process). Each is measured on both MCP
revisions, the client's mode pinned (the SDK's default, `auto`, speaks 2026-07-28 to a server that
offers it): 2025-11-25 (an `initialize` handshake and a session) and 2026-07-28 (no session: each
request carries its version, client and capabilities); REVISIONS=2026-07-28 (comma-separated)
measures fewer. Rounds alternate between the servers and revisions, each on a fresh server process,
so machine load hits all alike. Per server and revision it reports start-up (process start to the port accepting), throughput and p50 latency at concurrency
1 and 8, server CPU per call (utime + stime deltas from /proc/PID/stat, which a loaded machine does
not inflate the way wall time is), peak RSS (VmHWM) and the client's own CPU per call. mcp-toolbox is installed by this script,
pinned, into target/tmp/toolbox-1.12.0 (npm). Set TOOLBOX=0 to measure toolrun alone, and
BASELINE=PATH to add another toolrun binary (say, main's before a change) to the same rounds.
At the end, toolrun's figures are held against the goals of issue 31 (server CPU a call at most a
quarter of toolbox's, calls/s at least toolbox's and p50 no higher, at concurrency 1 and 8).
"""
import os
import shutil
import socket
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
TOOLBOX_VERSION = "1.12.0"
TOOLBOX_DIR = os.path.join(TARGET, "tmp", f"toolbox-{TOOLBOX_VERSION}")
TOOLBOX_BIN = os.path.join(TOOLBOX_DIR, "node_modules/@toolbox-sdk/server-linux-x64/bin/toolbox")
CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
CONCURRENCY = 8
REVISIONS = os.environ.get("REVISIONS", "2025-11-25,2026-07-28").split(",")
TICKS = os.sysconf("SC_CLK_TCK")

# The upstream: a threaded keep-alive HTTP/1.1 server answering /get like httpbin does.
UPSTREAM = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qs
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else headers and body, written apart, meet delayed ACKs (40 ms)
    def do_GET(self):
        u = urlsplit(self.path)
        args = {k: v[0] for k, v in parse_qs(u.query).items()}
        body = json.dumps({"args": args, "headers": {"Host": self.headers.get("Host")},
                           "url": "http://" + str(self.headers.get("Host")) + self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

TOOLRUN_SPEC = """version: 1
name: serve_bench
tools:
  quote:
    kind: http
    description: Looks up a ticker.
    input: {{ type: object, properties: {{ ticker: {{ type: string }} }}, required: [ticker] }}
    request:
      url: "http://127.0.0.1:{port}/get"
      query: {{ ticker: "{{{{ args.ticker }}}}" }}
policy: {{ network: {{ allow_hosts: ["127.0.0.1:{port}"] }} }}
serve: {{ max_tool_calls: 1000000 }}
"""

TOOLBOX_TOOLS = """kind: source
name: upstream
type: http
baseUrl: http://127.0.0.1:{port}
allowPrivateNetworks: true
---
kind: tool
name: quote
type: http
source: upstream
method: GET
path: /get
description: Looks up a ticker.
queryParams:
  - name: ticker
    type: string
    description: The ticker.
"""


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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, deadline=20.0):
    end = time.perf_counter() + deadline
    while time.perf_counter() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return
        except OSError:
            time.sleep(0.0005)
    sys.exit("server did not start listening")


def install_toolbox():
    if not os.path.exists(TOOLBOX_BIN):
        os.makedirs(TOOLBOX_DIR, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", TOOLBOX_DIR,
                        f"@toolbox-sdk/server-linux-x64@{TOOLBOX_VERSION}"], check=True)


def start(kind, workdir, upstream_port):
    port = free_port()
    if kind in ("toolrun", "baseline"):
        spec = os.path.join(workdir, "spec.yaml")
        with open(spec, "w") as f:
            f.write(TOOLRUN_SPEC.format(port=upstream_port))
        binary = BIN if kind == "toolrun" else os.environ["BASELINE"]
        cmd = [binary, "serve", spec, "--http", f"127.0.0.1:{port}"]
        url = f"http://127.0.0.1:{port}/mcp"
    else:
        tools = os.path.join(workdir, "tools.yaml")
        with open(tools, "w") as f:
            f.write(TOOLBOX_TOOLS.format(port=upstream_port))
        cmd = [TOOLBOX_BIN, "--config", tools, "-a", "127.0.0.1", "-p", str(port),
               "--disable-version-check", "--disable-reload"]
        url = f"http://127.0.0.1:{port}/mcp"
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc)
    return proc, url, (time.perf_counter() - started) * 1000


async def drive(url, tag, revision):
    # Distinct arguments per call: toolrun's loop detection stops identical ones (as in a run).
    args = lambda i: {"ticker": f"{tag}{i}"}
    mode = "legacy" if revision < "2026-07-28" else revision
    async with Client(url, mode=mode) as client:
        if client.session.protocol_version != revision:
            sys.exit(f"asked for {revision}, the client speaks {client.session.protocol_version}")
        await client.list_tools()
        for i in range(20):  # warm-up: connections, lazy initialisation
            await client.call_tool("quote", args(-1 - i))
        seq = []
        t0 = time.perf_counter()
        for i in range(CALLS):
            t = time.perf_counter()
            r = await client.call_tool("quote", args(i))
            seq.append(time.perf_counter() - t)
        seq_wall = time.perf_counter() - t0
        if r.is_error or f"{tag}{CALLS - 1}" not in str(r.content):
            sys.exit(f"unexpected result: {r}")
        conc = []

        async def worker(k):
            for i in range(k, CALLS, CONCURRENCY):
                t = time.perf_counter()
                await client.call_tool("quote", args(CALLS + i))
                conc.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for k in range(CONCURRENCY):
                tg.start_soon(worker, k)
        return seq, seq_wall, conc, time.perf_counter() - t0


def one_round(kind, revision, workdir, upstream_port, n):
    proc, url, startup = start(kind, workdir, upstream_port)
    try:
        cpu_before = cpu_seconds(proc.pid)
        client_before = time.process_time()
        seq, seq_wall, conc, conc_wall = anyio.run(drive, url, f"R{n}T", revision)
        client = time.process_time() - client_before
        cpu = cpu_seconds(proc.pid) - cpu_before
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return {
        "startup_ms": startup,
        "rps1": len(seq) / seq_wall,
        "p50_1_ms": statistics.median(seq) * 1000,
        "rps8": len(conc) / conc_wall,
        "p50_8_ms": statistics.median(conc) * 1000,
        # The session's initialise, list and 20 warm-up calls are inside the CPU window: count them.
        "cpu_us": cpu / (len(seq) + len(conc) + 20) * 1e6,
        # The Python client's CPU a call: on 2 cores it competes with the server for time, so
        # what a server makes its client parse (SSE frames or one JSON body) shows in latency.
        "client_cpu_us": client / (len(seq) + len(conc) + 20) * 1e6,
        "rss_mb": rss,
    }


COLUMNS = [("startup_ms", "start-up ms"), ("cpu_us", "CPU/call us"), ("rps1", "calls/s c=1"),
           ("p50_1_ms", "p50 ms c=1"), ("rps8", "calls/s c=8"), ("p50_8_ms", "p50 ms c=8"),
           ("rss_mb", "peak RSS MB"), ("client_cpu_us", "client us")]


def goals(results, revision):
    """toolrun against toolbox on one revision: the goals of issue 31, in every round's median."""
    med = {k: {c: statistics.median(r[c] for r in results[(k, revision)]) for c, _ in COLUMNS}
           for k in ("toolrun", "toolbox") if (k, revision) in results}
    if len(med) < 2:
        return
    ours, theirs = med["toolrun"], med["toolbox"]
    checks = [
        (f"server CPU a call {ours['cpu_us']:.1f} us <= a quarter of {theirs['cpu_us']:.1f} us"
         f" ({theirs['cpu_us'] / ours['cpu_us']:.2f}x less)", ours["cpu_us"] * 4 <= theirs["cpu_us"]),
    ]
    for c in ("1", str(CONCURRENCY)):
        rps, p50 = f"rps{c}", f"p50_{c}_ms"
        checks.append((f"calls/s c={c} {ours[rps]:.0f} >= {theirs[rps]:.0f}", ours[rps] >= theirs[rps]))
        checks.append((f"p50 c={c} {ours[p50]:.2f} ms <= {theirs[p50]:.2f} ms", ours[p50] <= theirs[p50]))
    for text, met in checks:
        print(f"  {'met' if met else 'NOT met'}: {text}")


def main():
    if not os.path.exists(BIN):
        sys.exit(f"build the release binary first: cargo build --release ({BIN})")
    kinds = ["toolrun"]
    if os.environ.get("BASELINE"):
        kinds.append("baseline")
    if os.environ.get("TOOLBOX", "1") != "0":
        install_toolbox()
        kinds.append("toolbox")
    workdir = tempfile.mkdtemp(prefix="serve-bench-")
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    upstream_port = int(upstream.stdout.readline())
    runs = [(k, r) for k in kinds for r in REVISIONS]
    results = {run: [] for run in runs}
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {' '.join(f.read().split()[:3])}; {os.cpu_count()} CPUs")
    try:
        for n in range(ROUNDS):
            order = runs[n % len(runs):] + runs[:n % len(runs)]
            for kind, revision in order:
                r = one_round(kind, revision, workdir, upstream_port, n)
                results[(kind, revision)].append(r)
                print(f"round {n + 1} {kind:8} {revision} "
                      + "  ".join(f"{k} {v:.1f}" for k, v in r.items()), flush=True)
    finally:
        upstream.terminate()
        shutil.rmtree(workdir, ignore_errors=True)
    with open("/proc/loadavg") as f:
        print(f"\nload average at the end: {' '.join(f.read().split()[:3])}; {os.cpu_count()} CPUs")
    print(f"{CALLS} calls at concurrency 1 and {CALLS} at {CONCURRENCY} per round, {ROUNDS} rounds; medians:")
    print(f"{'':19} " + " ".join(f"{h:>12}" for _, h in COLUMNS))
    for kind, revision in runs:
        med = [statistics.median(r[k] for r in results[(kind, revision)]) for k, _ in COLUMNS]
        print(f"{kind:8} {revision} " + " ".join(f"{v:12.1f}" for v in med))
    for revision in REVISIONS:
        if ("toolbox", revision) in results:
            print(f"goals on {revision}:")
            goals(results, revision)


if __name__ == "__main__":
    main()
