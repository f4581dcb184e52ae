"""A stdio MCP server built with the official Python SDK (PyPI `mcp`, its MCPServer), for the
tests of how toolrun starts, talks to and ends stdio servers.

usage: stdio_server.py LOG_DIR
On start it writes `LOG_DIR/pids.jsonl` a line `{"leader": PID, "helper": PID}`: its own pid and
that of a helper process it starts (which ignores SIGTERM and stdin, so only SIGKILL to the
process group ends it), and `LOG_DIR/seen-PID.json`: the /proc state of every process listed
before it (`gone` when there is none), so a later server of the same toolrun process can say
whether an earlier one was left behind, running or as a zombie.
"""

import json
import os

import anyio
import signal
import subprocess
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("stdio-probe")


def state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1]
    except FileNotFoundError:
        return "gone"
    return "?"


@server.tool()
def echo(text: str) -> str:
    """Returns the text."""
    return text


@server.tool()
def environment() -> dict:
    """The environment and working directory the server was started with."""
    return {"cwd": os.getcwd(), "env": dict(os.environ)}


@server.tool()
def shout(size: int, after: int = 0) -> str:
    """Writes `size` bytes to stderr, then the secret it was given, then `after` bytes, and
    answers."""
    sys.stderr.write("x" * size + "\n")
    sys.stderr.write("token " + os.environ.get("PROBE_TOKEN", "") + "\n")
    if after:
        sys.stderr.write("y" * after + "\n")
    sys.stderr.flush()
    return "shouted"


@server.tool()
def big(size: int) -> str:
    """Answers with `size` bytes of text."""
    return "y" * size


@server.tool()
def crash() -> str:
    """Says why on stderr and exits at once, without answering."""
    sys.stderr.write("fatal: the probe crashed on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def wait() -> str:
    """Says it is waiting (a `waiting` file in LOG_DIR), then waits a minute."""
    with open(os.path.join(sys.argv[1], "waiting"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
    return "waited"


@server.tool()
async def ask_back(ctx: Context) -> str:
    """Pings the client and asks for its roots during the call, and says what came back;
    reports progress and logs a line meanwhile."""
    await ctx.report_progress(1, 2, "asking back")
    await ctx.info("the probe asks back")
    await ctx.session.send_ping()
    try:
        await ctx.session.list_roots()
        roots = "roots answered"
    except Exception as e:  # the client declared no roots capability: an error is the answer
        roots = f"roots refused: {e}"
    return f"pong; {roots}"


class Name(BaseModel):
    name: str = "Ada"


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the client for a name (elicitation; the one field has a default) and says what came back."""
    result = await ctx.elicit("Your name?", schema=Name)
    data = getattr(result, "data", None)
    return f"{result.action}: {data.name if data else '-'}"


@server.tool()
async def ask_then_wait(ctx: Context) -> str:
    """Asks for a name (elicitation), then waits a minute whatever the answer."""
    await ctx.elicit("Your name?", schema=Name)
    await anyio.sleep(60)
    return "waited"


@server.tool()
async def ask_then_crash(ctx: Context) -> str:
    """Asks for a name (elicitation), then exits at once without answering."""
    await ctx.elicit("Your name?", schema=Name)
    sys.stderr.write("fatal: the probe crashed after asking\n")
    sys.stderr.flush()
    os._exit(3)


# Whether a call of `wait_to_be_cancelled` was cancelled (`notifications/cancelled`).
CANCELLED = []


@server.tool()
async def wait_to_be_cancelled() -> str:
    """Waits a minute, unless the client cancels the call."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        CANCELLED.append(True)
        raise
    return "waited"


@server.tool()
async def was_cancelled() -> str:
    """Whether a call of `wait_to_be_cancelled` was cancelled (waiting a little for it)."""
    with anyio.move_on_after(2):
        while not CANCELLED:
            await anyio.sleep(0.05)
    return "cancelled" if CANCELLED else "not cancelled"


@server.tool()
def fail() -> str:
    """A tool error."""
    raise ToolError("the probe failed on purpose")


def main() -> None:
    log_dir = sys.argv[1]
    os.makedirs(log_dir, exist_ok=True)
    pids_path = os.path.join(log_dir, "pids.jsonl")
    seen = {}
    if os.path.exists(pids_path):
        with open(pids_path) as f:
            for line in f:
                entry = json.loads(line)
                for role, pid in entry.items():
                    seen[f"{role} {pid}"] = state(pid)
    with open(os.path.join(log_dir, f"seen-{os.getpid()}.json"), "w") as f:
        json.dump(seen, f)
    helper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(pids_path, "a") as f:
        f.write(json.dumps({"leader": os.getpid(), "helper": helper.pid}) + "\n")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    server.run("stdio")


if __name__ == "__main__":
    main()
