#!/usr/bin/env bash
# Fan-out benchmark: one model turn asks for 8 HTTP calls to a server that answers each after
# 200 ms. With the calls running concurrently a run takes ~200 ms plus start-up; serialised it
# would take 1.6 s. Not run in CI (timing on shared runners is noise).
#
#   benches/http_fanout.sh [RUNS]        # default 10; needs python3 and a built toolrun
#   TOOLRUN=target/release/toolrun benches/http_fanout.sh 20
set -euo pipefail

runs="${1:-10}"
root="$(cd "$(dirname "$0")/.." && pwd)"
toolrun="${TOOLRUN:-${CARGO_TARGET_DIR:-$root/target}/release/toolrun}"
if [[ ! -x "$toolrun" ]]; then
  echo "building $toolrun ..." >&2
  (cd "$root" && cargo build --release --quiet)
fi

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A threaded server on 127.0.0.1 only; it prints its port, then answers every GET after 200 ms.
cat >"$work/server.py" <<'PY'
import http.server, json, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        time.sleep(0.2)
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$work/server.py" >"$work/port" &
server_pid=$!
for _ in $(seq 50); do [[ -s "$work/port" ]] && break; sleep 0.1; done
port="$(cat "$work/port")"

calls=""
for i in $(seq 1 8); do calls+="{ name: slow, arguments: { n: $i } }, "; done
cat >"$work/fanout.yaml" <<YAML
version: 1
name: http_fanout
tools:
  slow:
    description: Answers after 200 ms; for the fan-out benchmark.
    kind: http
    input: { type: object, properties: { n: { type: integer } }, required: [n] }
    request: { url: "http://127.0.0.1:$port/slow/{{ args.n }}" }
    timeout: 10s
limits: { max_parallel_tools: 8, max_tool_calls: 8 }
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [ ${calls%, } ]
          - answer: "done"
YAML

"$toolrun" run "$work/fanout.yaml" --query go >/dev/null # warm-up, and fail early if broken
if command -v hyperfine >/dev/null; then
  hyperfine --warmup 1 --runs "$runs" "$toolrun run $work/fanout.yaml --query go"
else
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do "$toolrun" run "$work/fanout.yaml" --query go >/dev/null; done
  end=$(date +%s%N)
  echo "8 parallel 200 ms calls: $(( (end - start) / runs / 1000000 )) ms per run (mean of $runs; serial would be >= 1600 ms)"
fi
