"""Drives an MCP server with the official Python SDK (PyPI `mcp`), a client toolrun did not write.

usage: client.py [--elicit] stdio COMMAND [ARG...]   |   client.py [--elicit] http URL [TOKEN]
Reads a JSON list of calls on stdin ([{"name": ..., "arguments": {...}}, ...]; an entry
{"concurrent": [calls]} runs its calls at once), prints one JSON document on stdout:
{"server": ..., "tools": [...], "calls": [CallToolResult, ...]} (camelCase, as on the wire); a
call the server refused with a JSON-RPC error is {"error": {"code": ..., "message": ...}} there.

--elicit declares the elicitation capability: a call's "confirm" key is what its user answers
when the server asks (`accept`, `accept_unticked`, `decline`, `cancel`; none: `decline`), and
the output gains "elicitations", every request the server sent, in order.

A call's "meta" key, if any, goes as its request's params._meta (e.g. a W3C traceparent).
A call's "abandon_after" key (seconds) gives up on it then (the SDK sends
`notifications/cancelled`); its output entry is {"abandoned": true}.

CLIENT_MODE in the environment picks the SDK's protocol mode: `legacy` (the default: an
`initialize` handshake and a session, 2025-11-25, as every test written before 2026-07-28
expects), `auto` (probes `server/discover` and speaks 2026-07-28 to a server that offers it) or
a modern version pinned (`2026-07-28`). CLIENT_LOG_LEVEL opts in to logs on 2026-07-28; the
output then gains "logs", every `notifications/message` received.
"""

import json
import os
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


ANSWERS = {
    "accept": types.ElicitResult(action="accept", content={"approve": True}),
    "accept_unticked": types.ElicitResult(action="accept", content={"approve": False}),
    "decline": types.ElicitResult(action="decline"),
    "cancel": types.ElicitResult(action="cancel"),
}


async def main():
    args = sys.argv[1:]
    elicit = args[0] == "--elicit"
    if elicit:
        args = args[1:]
    mode, rest = args[0], args[1:]
    plan = json.load(sys.stdin)
    elicitations = []
    # What the person answers to the next question (calls that confirm run one at a time).
    answer = {"now": "decline"}

    async def on_elicit(context, params):
        elicitations.append(dump(params))
        return ANSWERS[answer["now"]]
    if mode == "stdio":
        # The server gets this process's environment: the test decides what it holds.
        target = StdioServerParameters(command=rest[0], args=rest[1:], env=dict(os.environ))
    else:
        headers = {"Authorization": f"Bearer {rest[1]}"} if len(rest) > 1 else {}
        # More headers as a JSON object (a W3C `traceparent` for the telemetry tests).
        headers.update(json.loads(os.environ.get("CLIENT_HEADERS", "{}")))
        target = streamable_http_client(rest[0], http_client=httpx2.AsyncClient(headers=headers))
    options = {"elicitation_callback": on_elicit} if elicit else {}
    options["mode"] = os.environ.get("CLIENT_MODE", "legacy")
    logs = []

    async def on_log(params):
        logs.append(dump(params))

    if os.environ.get("CLIENT_LOG_LEVEL"):
        options["log_level"] = os.environ["CLIENT_LOG_LEVEL"]
        options["logging_callback"] = on_log

    async def call(client, c):
        try:
            meta = {"meta": c["meta"]} if "meta" in c else {}
            if "abandon_after" in c:
                with anyio.move_on_after(c["abandon_after"]):
                    return dump(await client.call_tool(c["name"], c.get("arguments", {}), **meta))
                return {"abandoned": True}
            return dump(await client.call_tool(c["name"], c.get("arguments", {}), **meta))
        except MCPError as e:
            return {"error": {"code": e.code, "message": e.message}}

    async with Client(target, **options) as client:
        tools = await client.list_tools()
        calls = []
        for step in plan:
            if "concurrent" in step:
                results = [None] * len(step["concurrent"])

                async def one(i, c):
                    results[i] = await call(client, c)

                async with anyio.create_task_group() as tg:
                    for i, c in enumerate(step["concurrent"]):
                        tg.start_soon(one, i, c)
                calls.extend(results)
            else:
                answer["now"] = step.get("confirm", "decline")
                calls.append(await call(client, step))
        doc = {"tools": [dump(t) for t in tools.tools], "calls": calls}
        if elicit:
            doc["elicitations"] = elicitations
        if os.environ.get("CLIENT_LOG_LEVEL"):
            doc["logs"] = logs
        doc["protocol"] = client.session.protocol_version
        print(json.dumps(doc))


anyio.run(main)
