"""A streamable-HTTP MCP server built with the official Python SDK (PyPI `mcp`: its MCPServer,
FastMCP before 2.0), which `kind: mcp` tools are tested against: a server toolrun did not write.

usage: notes_server.py HEADERS_LOG [PORT]
Binds 127.0.0.1 on PORT (default: a free port) and prints the port as its first line of stdout. The
method, path, headers and response status of every HTTP request it receives are appended to
HEADERS_LOG, one JSON object per line, so a test can check what reached the server (a secret
header, the DELETE that ends a session) without the server echoing it anywhere.
With NOTES_REFUSE_DELETE=1 in the environment it answers DELETE with 405, as a server that does
not let clients end their sessions may. NOTES_ANNOTATED=1 adds tools carrying annotations,
NOTES_ELICIT=1 a tool that asks its user to confirm (`archive_notes`).
`install_extra` and `upgrade_search` change the tool list and say so with
`notifications/tools/list_changed` in their reply's event stream.
"""

import json
import os
import socket
import sys

import time

import anyio
import uvicorn
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel, Field
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations, ToolListChangedNotification

server = MCPServer("notes")
NOTES = {"groceries": "milk, eggs, coffee", "ideas": "a tool-use loop declared in YAML"}


@server.tool()
def search_notes(query: str) -> dict:
    """Finds notes whose title or text contains the query (case-insensitive)."""
    hits = [
        {"title": title, "text": text}
        for title, text in NOTES.items()
        if query.lower() in f"{title} {text}".lower()
    ]
    return {"query": query, "hits": hits}


@server.tool()
def add_note(title: str, text: str) -> str:
    """Adds a note with this title and text."""
    NOTES[title] = text
    return f"added {title}"


@server.tool()
def delete_note(title: str) -> str:
    """Deletes the note with this title; fails when there is none."""
    if title not in NOTES:
        # ToolError: the SDK passes its message on to the client (other exceptions are hidden).
        raise ToolError(f"no note titled {title!r}")
    del NOTES[title]
    return f"deleted {title}"


@server.tool()
def whoami(ctx: Context) -> str:
    """Says which API key the request carried: a careless server echoing a credential."""
    return f"you called with key {ctx.request_context.request.headers.get('x-api-key')}"


@server.tool()
def slow_search(query: str) -> str:
    """Searches, slowly (three seconds)."""
    time.sleep(3)
    return f"nothing about {query}"


INSTALLED = []


async def tools_changed(ctx: Context) -> None:
    """Tells the client, in this request's event stream, that the tool list changed."""
    await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)


@server.tool()
async def install_extra(ctx: Context) -> str:
    """Installs one more tool, `extra`, and announces the change."""
    if not INSTALLED:
        server.add_tool(lambda: "extra", name="extra", description="An extra tool.")
        INSTALLED.append("extra")
    await tools_changed(ctx)
    return "installed"


@server.tool()
async def upgrade_search(ctx: Context) -> str:
    """Replaces `search_notes` with one that needs a `limit`, and announces the change."""

    def search_notes(query: str, limit: int) -> dict:
        """Finds notes, at most `limit` of them."""
        return {"query": query, "hits": []}

    server.remove_tool("search_notes")
    server.add_tool(search_notes)
    await tools_changed(ctx)
    return "upgraded"


if os.environ.get("NOTES_ANNOTATED") == "1":
    # Tools whose annotations hint at what they change (MCP ToolAnnotations); only fields set
    # here are sent.

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def count_notes() -> int:
        """Counts the notes."""
        return len(NOTES)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def append_note(title: str, text: str) -> str:
        """Appends text to a note, creating it when needed."""
        NOTES[title] = (NOTES.get(title, "") + " " + text).strip()
        return f"appended to {title}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def purge_notes() -> str:
        """Deletes every note."""
        NOTES.clear()
        return "purged"


if os.environ.get("NOTES_ELICIT") == "1":
    # A tool that asks its user first: at 2026-07-28 the SDK asks in an `input_required` result
    # (the client answers in a retry, echoing the request state), before that in an
    # `elicitation/create` request during the call.

    class Confirm(BaseModel):
        sure: bool = Field(default=True, description="Really archive every note?")

    def ask_archive() -> Elicit[Confirm]:
        return Elicit("Archive every note?", Confirm)

    @server.tool()
    def archive_notes(answer: Annotated[ElicitationResult[Confirm], Resolve(ask_archive)]) -> str:
        """Archives every note, once its user confirms."""
        if isinstance(answer, AcceptedElicitation) and answer.data.sure:
            return f"archived {len(NOTES)} notes"
        return f"kept the notes ({answer.action})"


def main():
    log_path = sys.argv[1]
    app = server.streamable_http_app()

    refuse_delete = os.environ.get("NOTES_REFUSE_DELETE") == "1"

    async def logged(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        # Logged before the status goes out: once a client has its answer, the line is there.
        async def noted(message):
            if message["type"] == "http.response.start":
                entry = {"method": scope["method"], "path": scope["path"], "headers": headers}
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps({**entry, "status": message["status"]}) + "\n")
            await send(message)

        if refuse_delete and scope["method"] == "DELETE":
            await noted({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET, POST")]})
            await send({"type": "http.response.body", "body": b""})
        else:
            await app(scope, receive, noted)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0))
    # Listening before the port is announced: a client that connects at once is queued, not
    # refused, while uvicorn starts.
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(logged, log_level="warning", lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
