"""Several clients of the official MCP Python SDK (PyPI `mcp`) at once, each in a session of its
own on the 2025-11-25 revision (mode="legacy": `initialize`, then Mcp-Session-Id on every
request), calling one tool through a load balancer (tests/mcp_balancer.rs).

usage: balanced_client.py URL CLIENTS CALLS TOOL
Client k makes CALLS calls of TOOL with arguments {"n": k * CALLS + i}, one after another, and
prints one JSON document on stdout: {"clients": [{"protocol": ..., "texts": [...]}, ...]}, the
text of each call's result in order (a call refused with a JSON-RPC error: "error: MESSAGE").
"""

import json
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def main():
    url, clients, calls, tool = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    out = [None] * clients

    async def one(k):
        texts = []
        async with Client(streamable_http_client(url), mode="legacy") as client:
            for i in range(calls):
                try:
                    result = await client.call_tool(tool, {"n": k * calls + i})
                    texts.append("".join(getattr(c, "text", "") for c in result.content))
                except MCPError as e:
                    texts.append(f"error: {e.message}")
            out[k] = {"protocol": client.protocol_version, "texts": texts}

    async with anyio.create_task_group() as tg:
        for k in range(clients):
            tg.start_soon(one, k)
    print(json.dumps({"clients": out}))


anyio.run(main)
