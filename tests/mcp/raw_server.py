"""A stdio MCP server in plain Python (no SDK), for what tests/mcp_exec.rs needs a server to do
that a well-behaved one never does.

    raw_server.py serve   answers `initialize`, `tools/list` and `tools/call` of its tools:
                          `echo` (its `text`), `pid` (its process id), `env` (the value of the
                          variable `name`, or null), `crash` (exits at once, status 3)
    raw_server.py flood [DIR]   answers `initialize` and `tools/list`, then never reads its
                          stdin again and sends requests (`ping`) until its stdout is full
                          (first writing the file `DIR/flooding-PID`)
"""

import json
import os
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
        }[name]()
        return {"content": [{"type": "text", "text": json.dumps(value)}]}
    return None


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
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


if __name__ == "__main__":
    main()
