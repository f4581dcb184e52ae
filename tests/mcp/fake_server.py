"""A small streamable-HTTP MCP server (standard library only) that misbehaves on purpose, for the
cases real servers rarely show: requests to the client on a call's stream, a stream closed before
its response, a response under another id, a listing that never ends, a call never answered.

usage: fake_server.py MODE LOG
Binds 127.0.0.1 on a free port and prints the port as its first line of stdout. Every message it
receives is appended to LOG as one JSON line: {"http": METHOD, "headers": {...}, "body": ...}.
MODE says what `tools/call` (of its one tool, `work`) does:
  requests  asks the client `ping`, `sampling/createMessage`, `roots/list` and
            `elicitation/create` on the call's stream, sends progress and a log message, waits
            for every answer, then returns them as the result's structuredContent
  resume    sends `id: e-1` and `retry: 300`, closes the stream; the response comes on the GET
            that resumes it with `Last-Event-ID: e-1` (a stream that then stays open)
  wrong_id  answers under id 999
  pages     (tools/list) pages of 1 MiB, each with a next cursor, forever
  big_pages (tools/list) pages of 3.5 MiB (one tool's description), each with a next cursor, forever
  hang      never answers
  crossed   two calls at once: once both are in flight, the session's own stream (the one GET it
            accepts; another gets 409) carries each call's progress (`for n=N`, N its argument
            `n`) and a ping; once that is answered, each call is answered on its own stream
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
LOG = sys.argv[2]
ANSWERS = {}
CHANGED = threading.Condition()
PENDING = {}
CROSSED = {"calls": {}, "get": False, "sent": False}
TOOL = {"name": "work", "description": "Does some work.", "inputSchema": {"type": "object"}}
ELICIT_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "default": "Ada"}, "n": {"type": "integer", "default": 3}},
    "required": ["name"],
}


def log(entry):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, message, status=200):
        body = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "fake-session")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Mcp-Session-Id", "fake-session")
        self.end_headers()

    def event(self, message=None, event_id=None, retry=None):
        text = ""
        if event_id:
            text += f"id: {event_id}\n"
        if retry:
            text += f"retry: {retry}\n"
        text += "data: " + (json.dumps(message) if message is not None else "") + "\n\n"
        self.wfile.write(text.encode())
        self.wfile.flush()

    def do_DELETE(self):
        log({"http": "DELETE", "headers": dict(self.headers), "body": None})
        self.send_response(200)
        self.end_headers()

    def do_GET(self):
        log({"http": "GET", "headers": dict(self.headers), "body": None})
        if MODE == "crossed":
            self.crossed_stream()
            return
        if MODE != "resume" or self.headers.get("Last-Event-ID") != "e-1" or "call" not in PENDING:
            self.send_response(405)
            self.end_headers()
            return
        self.start_stream()
        answer = {"jsonrpc": "2.0", "id": PENDING.pop("call"), "result": {"content": [{"type": "text", "text": "resumed"}]}}
        self.event(answer, event_id="e-2")
        time.sleep(30)  # a resumed stream stays open: the client stops reading at the response

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        message = json.loads(self.rfile.read(length) or b"null")
        log({"http": "POST", "headers": dict(self.headers), "body": message})
        method = message.get("method")
        if method is None:  # an answer to one of our requests
            with CHANGED:
                ANSWERS[message.get("id")] = message
                CHANGED.notify_all()
            self.send_response(202)
            self.end_headers()
            return
        if "id" not in message:  # a notification
            self.send_response(202)
            self.end_headers()
            return
        rid = message["id"]
        if method == "initialize":
            self.send_json({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"}}})
        elif method == "tools/list":
            if MODE in ("pages", "big_pages"):
                size = (1 << 20) if MODE == "pages" else (7 << 19)
                page = {"tools": [dict(TOOL, description="x" * size)], "nextCursor": "more"}
                self.send_json({"jsonrpc": "2.0", "id": rid, "result": page})
            else:
                self.send_json({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}})
        elif method == "tools/call":
            self.call(rid, message.get("params", {}))
        else:
            self.send_json({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})

    def crossed_stream(self):
        with CHANGED:
            taken = CROSSED["get"]
            CROSSED["get"] = True
        if taken:
            self.send_response(409)
            self.end_headers()
            return
        self.start_stream()
        with CHANGED:
            CHANGED.wait_for(lambda: len(CROSSED["calls"]) == 2, timeout=20)
            calls = list(CROSSED["calls"].values())
        for token, n in calls:
            self.event({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 1, "message": f"for n={n}"}})
        # Its answer says the client read the stream this far: the calls are answered after it.
        self.event({"jsonrpc": "2.0", "id": "q-crossed", "method": "ping"})
        with CHANGED:
            CHANGED.wait_for(lambda: "q-crossed" in ANSWERS, timeout=20)
            CROSSED["sent"] = True
            CHANGED.notify_all()
        time.sleep(30)  # the session's stream stays open; the client stops reading it

    def call(self, rid, params):
        if MODE == "crossed":
            self.start_stream()
            n = params.get("arguments", {}).get("n")
            with CHANGED:
                CROSSED["calls"][rid] = (params.get("_meta", {}).get("progressToken"), n)
                CHANGED.notify_all()
                CHANGED.wait_for(lambda: CROSSED["sent"], timeout=20)
            self.event({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": f"done n={n}"}]}})
        elif MODE == "wrong_id":
            self.send_json({"jsonrpc": "2.0", "id": 999, "result": {"content": []}})
        elif MODE == "hang":
            time.sleep(30)
        elif MODE == "resume":
            PENDING["call"] = rid
            self.start_stream()
            self.event(None, event_id="e-1", retry=300)
        elif MODE == "requests":
            self.start_stream()
            token = params.get("_meta", {}).get("progressToken")
            self.event({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "total": 2, "message": "halfway"}})
            self.event({"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {"level": "info", "logger": "fake", "data": "working on it"}})
            asked = {
                "q-ping": ("ping", {}),
                "q-sampling": ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
                "q-roots": ("roots/list", {}),
                "q-elicit": ("elicitation/create", {"message": "Who?", "requestedSchema": ELICIT_SCHEMA}),
            }
            for qid, (m, p) in asked.items():
                self.event({"jsonrpc": "2.0", "id": qid, "method": m, "params": p})
            got = {}
            with CHANGED:
                CHANGED.wait_for(lambda: all(q in ANSWERS for q in asked), timeout=20)
                for q in asked:
                    got[q] = ANSWERS.get(q)
            self.event({"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": "asked four things"}], "structuredContent": got}})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
