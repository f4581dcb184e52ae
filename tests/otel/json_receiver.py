"""An OTLP/HTTP JSON trace receiver for the tests: every POST to /v1/traces is decoded with the
official message types (opentelemetry-proto's ExportTraceServiceRequest and protobuf's
json_format, strict: an unknown field or a wrong type is refused), and each span is printed as one
JSON line, ids as hex like oteltap prints them.

OTLP/JSON differs from the generic protobuf JSON mapping in one place the decoder must honour:
traceId, spanId and parentSpanId (and a link's ids) are hex strings, not base64. They are
converted exactly as the specification says (a hex string of 16 or 8 bytes; an empty parent
means none) before json_format reads the message; anything else is refused with 400.

Usage: json_receiver.py PORT  (prints "Listening on PORT" first).
"""

import base64
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

HEX = set("0123456789abcdefABCDEF")


def hex_to_base64(value, size, field, optional=False):
    if not isinstance(value, str):
        raise ValueError(f"{field} is not a string: {value!r}")
    if value == "" and optional:
        return ""
    if len(value) != 2 * size or not set(value) <= HEX:
        raise ValueError(f"{field} is not {size} hex-encoded bytes: {value!r}")
    return base64.b64encode(bytes.fromhex(value)).decode()


def convert_ids(body):
    """The OTLP/JSON hex ids as the protobuf JSON mapping's base64, in place."""
    for rs in body.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key, size, optional in (
                    ("traceId", 16, False),
                    ("spanId", 8, False),
                    ("parentSpanId", 8, True),
                ):
                    if key in span:
                        span[key] = hex_to_base64(span[key], size, key, optional)
                for link in span.get("links", []):
                    for key, size in (("traceId", 16), ("spanId", 8)):
                        if key in link:
                            link[key] = hex_to_base64(link[key], size, "link " + key)


def printed(span, resource):
    out = json_format.MessageToDict(span, use_integers_for_enums=True)
    out["traceId"] = span.trace_id.hex()
    out["spanId"] = span.span_id.hex()
    out["parentSpanId"] = span.parent_span_id.hex()
    out["resource"] = json_format.MessageToDict(resource)
    return out


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"unexpected path {self.path}")
            if self.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                raise ValueError(f"content-type {self.headers.get('content-type')!r}")
            body = json.loads(raw)
            convert_ids(body)
            request = json_format.ParseDict(body, ExportTraceServiceRequest())
        except Exception as e:  # noqa: BLE001 - every failure is the sender's, and is shown
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
            self.send_response(400)
            self.end_headers()
            return
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    print(json.dumps(printed(span, rs.resource)), flush=True)
        answer = json_format.MessageToJson(ExportTraceServiceResponse()).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"Listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
