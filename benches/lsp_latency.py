#!/usr/bin/env python3
"""How soon `toolrun lsp` publishes diagnostics after a change, on a spec of 1,000 tools (issue
35 asks for 50 ms). Not run in CI: timings depend on the machine. No packages needed:

    python3 benches/lsp_latency.py [CHANGES] [TOOLS]

The binary is $TOOLRUN, else target/release/toolrun (`cargo build --release`), else
target/debug/toolrun (much slower: its numbers say little). Each change is an incremental edit of
one tool's description, sent after the previous diagnostics arrived; the time is from writing
the `didChange` to reading the `publishDiagnostics` of its version, so it includes the parse of
the whole spec, the compile of the edited tool and of every check across tools (the others'
compiles are kept from the last change), and both pipes. It reports p50, p90 and max,
and the same for `toolrun check` of the file, the compile alone plus a process start.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
CHANGES = int(sys.argv[1]) if len(sys.argv) > 1 else 50
TOOLS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000


def binary():
    if os.environ.get("TOOLRUN"):
        return os.environ["TOOLRUN"]
    for profile in ("release", "debug"):
        path = os.path.join(TARGET, profile, "toolrun")
        if os.path.exists(path):
            if profile == "debug":
                print("warning: no release build; measuring the debug binary", file=sys.stderr)
            return path
    sys.exit("no toolrun binary: cargo build --release, or set TOOLRUN")


def spec(tools):
    lines = ["version: 1", "tools:"]
    for i in range(tools):
        lines += [
            f"  tool_{i}:",
            "    kind: mock",
            f"    description: Looks up record {i} of the inventory by its id.",
            "    input: { type: object, properties: { id: { type: string } }, required: [id] }",
            "    responses:",
            "      - when: { id: a }",
            "        result: { found: true, name: \"{{ args.id }}\" }",
            "      - result: { found: false }",
        ]
    lines += ["policy:", "  allow: [" + ", ".join(f"tool_{i}" for i in range(tools)) + "]"]
    lines += [
        "models:",
        "  bot:",
        "    kind: scripted",
        "    scripts:",
        "      - turns:",
        "          - tool_calls: [{ name: tool_0, arguments: { id: a } }]",
        "          - answer: done",
        "tests:",
        "  - name: t",
        "    query: q",
        "    expect: { tool_calls: [tool_0], status: ok }",
    ]
    return "\n".join(lines) + "\n"


class Server:
    def __init__(self, bin, cwd):
        self.p = subprocess.Popen(
            [bin, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd
        )
        self.next = 0

    def send(self, msg):
        body = json.dumps(msg).encode()
        self.p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.p.stdin.flush()

    def read(self):
        length = 0
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise EOFError("the server ended")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return json.loads(self.p.stdout.read(length))

    def request(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            m = self.read()
            if m.get("id") == self.next and "method" not in m:
                return m

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def diagnostics(self, uri, version):
        while True:
            m = self.read()
            p = m.get("params") or {}
            if m.get("method") == "textDocument/publishDiagnostics" and p.get("uri") == uri and p.get("version") == version:
                return p["diagnostics"]


def summary(name, ms):
    ms = sorted(ms)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    print(f"{name}: p50 {statistics.median(ms):.1f} ms, p90 {p90:.1f} ms, max {ms[-1]:.1f} ms ({len(ms)} samples)")


def main():
    bin = binary()
    with tempfile.TemporaryDirectory() as tmp:
        text = spec(TOOLS)
        path = os.path.join(tmp, "spec.yaml")
        with open(path, "w") as f:
            f.write(text)
        print(f"{TOOLS} tools, {len(text)} bytes, {text.count(chr(10))} lines; binary {bin}")
        checks = []
        for _ in range(min(CHANGES, 20)):
            t = time.perf_counter()
            subprocess.run([bin, "check", "--format", "json", path], cwd=tmp, capture_output=True)
            checks.append((time.perf_counter() - t) * 1000)
        s = Server(bin, tmp)
        s.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        s.notify("initialized", {})
        uri = "file://" + path
        s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}})
        first = s.diagnostics(uri, 1)
        assert not [d for d in first if d["severity"] == 1], first
        line = text.split("\n").index("    description: Looks up record 0 of the inventory by its id.")
        times = []
        for v in range(2, CHANGES + 2):
            change = {
                "range": {"start": {"line": line, "character": 31}, "end": {"line": line, "character": 32}},
                "text": str(v % 10),
            }
            t = time.perf_counter()
            s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [change]})
            s.diagnostics(uri, v)
            times.append((time.perf_counter() - t) * 1000)
        s.request("shutdown", None)
        s.notify("exit", None)
        s.p.wait(timeout=30)
        summary("change -> diagnostics (lsp)", times)
        summary("toolrun check (process)", checks)


if __name__ == "__main__":
    main()
