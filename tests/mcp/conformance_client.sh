#!/usr/bin/env bash
# toolrun as the client of the official MCP conformance suite (`@modelcontextprotocol/conformance`):
#   conformance client --command "bash tests/mcp/conformance_client.sh" --scenario NAME
# The suite starts its test server and runs this command with the server's URL as the last
# argument, naming the scenario in MCP_CONFORMANCE_SCENARIO. This writes a spec with one
# `kind: mcp` entry for that server and drives it through the toolrun binary (TOOLRUN_BIN, else
# `toolrun` on PATH) as a user would: `toolrun call` of the scenario's tool, or for `initialize`
# a run whose server's tools are `"*"` (it lists none). Scenarios of authorization (`auth/*`)
# are out of scope; any other scenario is refused with exit 2.
set -euo pipefail

url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the conformance suite names the scenario in MCP_CONFORMANCE_SCENARIO}"
bin="${TOOLRUN_BIN:-toolrun}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

tools='"*"'
extra=''
tool=''
args='{}'
case "$scenario" in
  initialize) ;;
  tools_call) tools='[add_numbers]'; tool=add_numbers; args='{"a": 2, "b": 3}' ;;
  sse-retry) tools='[test_reconnection]'; tool=test_reconnection ;;
  elicitation-sep1034-client-defaults)
    tools='[test_client_elicitation_defaults]'
    tool=test_client_elicitation_defaults
    extra='    elicitation: defaults' ;;
  *)
    echo "toolrun's conformance client does not take part in scenario \`$scenario\`" >&2
    exit 2 ;;
esac

cat > "$dir/conformance.yaml" <<EOF
version: 1
name: conformance
tools:
  server:
    kind: mcp
    description: The conformance suite's test server.
    url: $url
    timeout: 20s
    tools: $tools
$extra
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - answer: connected
EOF

export TOOLRUN_CACHE_DIR=off
if [ -z "$tool" ]; then
  exec "$bin" run "$dir/conformance.yaml" --query "connect"
fi
exec "$bin" call "$dir/conformance.yaml" "$tool" --args "$args"
