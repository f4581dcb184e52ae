#!/usr/bin/env bash
# Sends a live run, a test run and a served MCP session to Arize Phoenix over OTLP, then reads
# them back from Phoenix's REST API and checks the spans are there, linked as expected.
# Not part of CI: it installs arize-phoenix (pinned) into a venv under target/tmp the first time.
#
#   scripts/phoenix.sh            # uses target/debug/toolrun (built if missing)
#   TOOLRUN=target/release/toolrun PHOENIX_PORT=6006 scripts/phoenix.sh
#   KEEP=1 scripts/phoenix.sh     # leave Phoenix running to look at http://127.0.0.1:$PHOENIX_PORT
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dir="$root/target/tmp/phoenix"
port="${PHOENIX_PORT:-16006}"
project=toolrun
toolrun="${TOOLRUN:-$root/target/debug/toolrun}"
[ -x "$toolrun" ] || cargo build --quiet
mkdir -p "$dir"
if [ ! -x "$dir/venv/bin/phoenix" ]; then
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check arize-phoenix==20.26.1
fi
rm -rf "$dir/work"
PHOENIX_WORKING_DIR="$dir/work" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" \
  PHOENIX_GRPC_PORT="$((port + 1))" "$dir/venv/bin/phoenix" serve > "$dir/phoenix.log" 2>&1 &
phoenix=$!
[ -n "${KEEP:-}" ] || trap 'kill $phoenix 2>/dev/null || true' EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
  curl -fsS "$base/healthz" > /dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "$base/healthz" > /dev/null || { cat "$dir/phoenix.log"; echo "Phoenix did not start"; exit 1; }

# Phoenix takes http/protobuf (the default) at /v1/traces; the project comes from a resource
# attribute Phoenix reads.
export OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="$base/v1/traces"
export OTEL_RESOURCE_ATTRIBUTES="openinference.project.name=$project"
export OTEL_BSP_EXPORT_TIMEOUT=10000

echo "== a live run (content captured)"
"$toolrun" run specs/stock_assistant.yaml \
  --query "What is the gain on 100 AAPL shares bought at 150?" --otlp-content
echo "== a test run"
"$toolrun" test specs/stock_assistant.yaml || true
echo "== a served session (stdio, raw JSON-RPC)"
{
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"phoenix.sh","version":"1"}}}'
  printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
  printf '%s\n' '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":42},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}'
  sleep 2
} | "$toolrun" serve specs/mcp_served.yaml > /dev/null

echo "== reading the spans back from $base/v1/projects/$project/spans"
for _ in $(seq 1 60); do
  curl -fsS "$base/v1/projects/$project/spans?limit=1000" > "$dir/spans.json" 2>/dev/null \
    && python3 - "$dir/spans.json" <<'PY' && exit 0
import json, sys
spans = json.load(open(sys.argv[1]))["data"]
names = [s["name"] for s in spans]
by_id = {s["context"]["span_id"]: s for s in spans}
want = ["invoke_agent stock_assistant", "chat scripted", "execute_tool get_stock_price",
        "toolrun test", "initialize", "tools/list", "tools/call lookup_order"]
missing = [w for w in want if w not in names]
if missing or not any(n.startswith("test_attempt ") for n in names):
    sys.exit(1)
chat = next(s for s in spans if s["name"] == "chat scripted")
parent = by_id.get(chat["parent_id"])
assert parent and parent["name"].startswith("invoke_agent"), "chat hangs under invoke_agent"
call = next(s for s in spans if s["name"] == "tools/call lookup_order")
assert call["context"]["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736", "traceparent continued"
print(f"Phoenix has {len(spans)} toolrun spans:")
for n in sorted(set(names)):
    print(f"  {names.count(n):3} x {n}")
PY
  sleep 1
done
echo "the spans did not all arrive; got:"
python3 -c 'import json,sys; print(sorted({s["name"] for s in json.load(open(sys.argv[1]))["data"]}))' "$dir/spans.json" || true
exit 1
