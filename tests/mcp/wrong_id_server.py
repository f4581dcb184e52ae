"""A hostile stdio MCP server, by hand (no SDK): it answers `initialize` and `tools/list` as it
should, and every `tools/call` under the id 999, which no request of the client has."""

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "wrong-id", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        rid = 999
        result = {"content": [{"type": "text", "text": "under the wrong id"}]}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)
