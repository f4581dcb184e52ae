"""A stdio MCP server in plain Python (no SDK), for what tests/mcp_exec.rs needs a server to do
that a well-behaved one never does.

    raw_server.py serve   answers `initialize`, `tools/list` and `tools/call` of its tools:
                          `echo` (its `text`), `pid` (its process id), `env` (the value of the
                          variable `name`, or null), `crash` (exits at once, status 3)
    raw_server.py flood [DIR]   answers `initialize` and `tools/list`, then never reads its
                          stdin again and sends requests (`ping`) until its stdout is full
                          (first writing the file `DIR/flooding-PID`)

Set in its environment (the entry's `env:`), for a server that is slow to start and to end:

    RAW_PID_DIR=DIR       writes the empty file `DIR/pid-PID` first of all
    RAW_START_DELAY=S     sleeps S seconds before it reads anything
    RAW_IGNORE_TERM=1     ignores SIGTERM (only SIGKILL ends it)
    RAW_LINGER=S          sleeps S seconds after its stdin ends before it exits
    RAW_HELPER=1          starts a helper process (as `npx` starts node), which writes its own
                          `DIR/pid-PID`, ignores SIGTERM too and runs until it is killed

and its tool `sleep` sleeps `seconds` before it answers.
"""

import json
import os
import signal
import sys
import time

TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": {"type": "object", "properties": props},
    }
    for name, props in [
        ("echo", {"text": {"type": "string"}}),
        ("pid", {}),
        ("env", {"name": {"type": "string"}}),
        ("crash", {}),
        ("sleep", {"seconds": {"type": "number"}}),
    ]
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "ping":
        return {}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name == "crash":
            sys.stderr.write("raw server: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        value = {
            "echo": lambda: args.get("text", ""),
            "pid": lambda: os.getpid(),
            "env": lambda: os.environ.get(args.get("name", "")),
            "sleep": lambda: time.sleep(float(args.get("seconds", 0))),
        }[name]()
        return {"content": [{"type": "text", "text": json.dumps(value)}]}
    return None


def slow_to_start_and_end():
    if os.environ.get("RAW_PID_DIR"):
        open(os.path.join(os.environ["RAW_PID_DIR"], f"pid-{os.getpid()}"), "w").close()
    if os.environ.get("RAW_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("RAW_HELPER") and os.fork() == 0:
        # In the server's process group, not on its pipes: only ending the group ends it.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        open(os.path.join(os.environ["RAW_PID_DIR"], f"pid-{os.getpid()}"), "w").close()
        while True:
            time.sleep(60)
    time.sleep(float(os.environ.get("RAW_START_DELAY", "0")))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    slow_to_start_and_end()
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if "id" not in request or "method" not in request:
            continue
        result = answer(request)
        if result is None:
            send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such method"}})
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "result": result})
        if mode == "flood" and request["method"] == "tools/list":
            break
    if mode == "flood":
        if len(sys.argv) > 2:
            open(os.path.join(sys.argv[2], f"flooding-{os.getpid()}"), "w").close()
        # Each ping needs an answer written to our stdin, which nobody reads: toolrun's writes
        # fill the pipe, then ours fill its, and here we wait (blocked, or asleep) for ever.
        for n in range(20000):
            send({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"})
        while True:
            time.sleep(60)
    time.sleep(float(os.environ.get("RAW_LINGER", "0")))


if __name__ == "__main__":
    main()
