#!/usr/bin/env python3
"""Instructions `toolrun serve --http` spends per `tools/call`, counted by callgrind: the stable
figure on a shared machine, where CPU times move by ±10% from run to run (not run in CI). Run it
with the venv the interop tests make (tests/mcp/setup.sh) and valgrind installed:

    target/tmp/mcp-venv/bin/python benches/serve_instructions.py [CALLS]
    BASELINE=/path/to/an/older/toolrun target/tmp/mcp-venv/bin/python benches/serve_instructions.py

The tool and upstream are `serve_bench.py`'s (GET a local httpbin-like `/get?ticker=`), called by
the official Python client. The server runs under `valgrind --tool=callgrind`; after the session's
initialise, list and 50 warm-up calls its counters are zeroed (`callgrind_control -z`), CALLS
sequential calls run (300 by default), and the counters are dumped (`-d`): the dump's total over
CALLS is the figure, kernel time excluded. REVISION=2026-07-28 has the client speak that revision
(default 2025-11-25, a session). Set KEEP=DIR to keep the dumps for
`callgrind_annotate` (build with `CARGO_PROFILE_RELEASE_STRIP=false` to see names in them).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import anyio
from mcp import Client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import BIN, TOOLRUN_SPEC, UPSTREAM, free_port, wait_listening  # noqa: E402

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
WARM_UP = 50
# The MCP revision the client speaks (the SDK's default, `auto`, speaks 2026-07-28 to toolrun).
REVISION = os.environ.get("REVISION", "2025-11-25")


async def drive(url, pid):
    mode = "legacy" if REVISION < "2026-07-28" else REVISION
    async with Client(url, mode=mode) as client:
        if client.session.protocol_version != REVISION:
            sys.exit(f"asked for {REVISION}, the client speaks {client.session.protocol_version}")
        await client.list_tools()
        for i in range(WARM_UP):
            await client.call_tool("quote", {"ticker": f"W{i}"})
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
        for i in range(CALLS):
            r = await client.call_tool("quote", {"ticker": f"T{i}"})
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        if r.is_error or f"T{CALLS - 1}" not in str(r.content):
            sys.exit(f"unexpected result: {r}")


def measure(binary, workdir, upstream_port, tag):
    spec = os.path.join(workdir, "spec.yaml")
    with open(spec, "w") as f:
        f.write(TOOLRUN_SPEC.format(port=upstream_port))
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{tag}.%p")
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "serve", spec,
         "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, deadline=60.0)
        anyio.run(drive, f"http://127.0.0.1:{port}/mcp", proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # The first dump (`.1`) is the one `-d` asked for; the file without a suffix is the rest.
    dumps = glob.glob(os.path.join(workdir, f"callgrind.{tag}.*.1"))
    if len(dumps) != 1:
        sys.exit(f"expected one callgrind dump for {binary}, found {dumps}")
    with open(dumps[0]) as f:
        total = next(int(line.split()[1]) for line in f if line.startswith("totals:"))
    return total / CALLS


def main():
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install valgrind)")
    binaries = [("toolrun", BIN)]
    if os.environ.get("BASELINE"):
        binaries.append(("baseline", os.environ["BASELINE"]))
    workdir = os.environ.get("KEEP") or tempfile.mkdtemp(prefix="serve-ir-")
    os.makedirs(workdir, exist_ok=True)
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        upstream_port = int(upstream.stdout.readline())
        for tag, binary in binaries:
            per_call = measure(binary, workdir, upstream_port, tag)
            print(f"{tag:8} {per_call:10,.0f} instructions per tools/call ({CALLS} calls)")
    finally:
        upstream.terminate()
        if not os.environ.get("KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
