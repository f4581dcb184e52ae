"""Drives an MCP server with the official Python SDK (PyPI `mcp`), a client toolrun did not write.

usage: client.py stdio COMMAND [ARG...]   |   client.py http URL [TOKEN]
Reads a JSON list of calls on stdin ([{"name": ..., "arguments": {...}}, ...]; an entry
{"concurrent": [calls]} runs its calls at once), prints one JSON document on stdout:
{"server": ..., "tools": [...], "calls": [CallToolResult, ...]} (camelCase, as on the wire).
"""

import json
import os
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main():
    mode, rest = sys.argv[1], sys.argv[2:]
    plan = json.load(sys.stdin)
    if mode == "stdio":
        # The server gets this process's environment: the test decides what it holds.
        target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        headers = {"Authorization": f"Bearer {rest[1]}"} if len(rest) > 1 else {}
        target = streamable_http_client(rest[0], http_client=httpx2.AsyncClient(headers=headers))
    async with Client(target) as client:
        tools = await client.list_tools()
        calls = []
        for step in plan:
            if "concurrent" in step:
                results = [None] * len(step["concurrent"])

                async def one(i, c):
                    results[i] = dump(await client.call_tool(c["name"], c.get("arguments", {})))

                async with anyio.create_task_group() as tg:
                    for i, c in enumerate(step["concurrent"]):
                        tg.start_soon(one, i, c)
                calls.extend(results)
            else:
                calls.append(dump(await client.call_tool(step["name"], step.get("arguments", {}))))
        print(json.dumps({"tools": [dump(t) for t in tools.tools], "calls": calls}))


anyio.run(main)
