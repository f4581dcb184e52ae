"""An OTLP/HTTP JSON trace receiver for the tests: every POST to /v1/traces is decoded with the
official message types (opentelemetry-proto's ExportTraceServiceRequest and protobuf's
json_format, strict: an unknown field or a wrong type is refused), and each span is printed as one
JSON line, ids as hex like oteltap prints them.

OTLP/JSON differs from the generic protobuf JSON mapping in one place the decoder must honour:
traceId, spanId and parentSpanId (and a link's ids) are hex strings, not base64. They are
converted exactly as the specification says (a hex string of 16 or 8 bytes; an empty parent
means none) before json_format reads the message; anything else is refused with 400.

Requests may be gzip-compressed (`Content-Encoding: gzip`, as OTLP/HTTP allows); any other
encoding is refused with 415. `application/x-protobuf` bodies are read with the same message
type, so a compressed protobuf export can be checked here too. Before a request's spans, one
line says how it came: {"request": {"content_type", "content_encoding", "traces": [hex ids]}}.

With `--tls DIR` it serves HTTPS on 127.0.0.1: it makes a CA of its own, a server certificate
for 127.0.0.1 and a client certificate (EC P-256, with `cryptography`), and writes DIR/ca.pem,
DIR/client.pem and DIR/client-key.pem; `--client-certs` also asks for a client certificate
signed by that CA and refuses a connection without one (the request line then names the
client's common name).

Usage: json_receiver.py PORT [--tls DIR [--client-certs]]  (prints "Listening on PORT" first).
"""

import base64
import datetime
import gzip
import json
import os
import ssl
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
        encoding = self.headers.get("content-encoding")
        content_type = self.headers.get("content-type", "").split(";")[0].strip()
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"unexpected path {self.path}")
            if encoding not in (None, "gzip"):
                print(json.dumps({"error": f"content-encoding {encoding!r}"}), flush=True)
                self.send_response(415)
                self.end_headers()
                return
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            if content_type == "application/json":
                body = json.loads(raw)
                convert_ids(body)
                request = json_format.ParseDict(body, ExportTraceServiceRequest())
            elif content_type == "application/x-protobuf":
                request = ExportTraceServiceRequest.FromString(raw)
            else:
                raise ValueError(f"content-type {self.headers.get('content-type')!r}")
        except Exception as e:  # noqa: BLE001 - every failure is the sender's, and is shown
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
            self.send_response(400)
            self.end_headers()
            return
        traces = sorted(
            {span.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans}
        )
        line = {"content_type": content_type, "content_encoding": encoding, "traces": traces}
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        if peer:
            line["client"] = dict(x[0] for x in peer["subject"]).get("commonName")
        print(json.dumps({"request": line}), flush=True)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    print(json.dumps(printed(span, rs.resource)), flush=True)
        # Answered in the request's own content type, as OTLP/HTTP asks.
        if content_type == "application/json":
            answer = json_format.MessageToJson(ExportTraceServiceResponse()).encode()
        else:
            answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def certificates(folder):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all made here."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def issue(subject, key, issuer, issuer_key, ca, extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        for ext in extensions:
            builder = builder.add_extension(ext, critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def pem(cert):
        return cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(key):
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = issue("toolrun test CA", ca_key, "toolrun test CA", ca_key, True, [
        x509.KeyUsage(False, False, False, False, False, True, True, False, False),
    ])
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = issue("127.0.0.1", server_key, "toolrun test CA", ca_key, False, [
        x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
    ])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = issue("toolrun-test-client", client_key, "toolrun test CA", ca_key, False, [
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
    ])
    files = {
        "ca.pem": pem(ca),
        "server.pem": pem(server) + key_pem(server_key),
        "client.pem": pem(client),
        "client-key.pem": key_pem(client_key),
    }
    for file, data in files.items():
        with open(os.path.join(folder, file), "wb") as f:
            f.write(data)


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    if "--tls" in sys.argv:
        folder = sys.argv[sys.argv.index("--tls") + 1]
        certificates(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(os.path.join(folder, "server.pem"))
        if "--client-certs" in sys.argv:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(os.path.join(folder, "ca.pem"))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"Listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
