#!/usr/bin/env bash
# toolrun as the client of the official MCP conformance suite (`@modelcontextprotocol/conformance`):
#   conformance client --command "bash tests/mcp/conformance_client.sh" --scenario NAME
# The suite starts its test server and runs this command with the server's URL as the last
# argument, naming the scenario in MCP_CONFORMANCE_SCENARIO (and for some, the calls to make in
# MCP_CONFORMANCE_CONTEXT, read with the suite's own `node`). This writes a spec with one
# `kind: mcp` entry for that server and drives it through the toolrun binary (TOOLRUN_BIN, else
# `toolrun` on PATH) as a user would: `toolrun call` of the scenario's tools, one after another,
# or for a scenario whose server offers no tool to call a run whose server's tools are `"*"`.
# For the authorization scenarios (`auth/*`) the entry has `auth: { oauth: ... }` (the
# credentials the suite hands over in MCP_CONFORMANCE_CONTEXT become secrets) and tokens are kept
# in a store of this run's own (XDG_STATE_HOME); a person's login runs on a terminal (`script`,
# with CI unset: toolrun opens no browser in CI) where the person answers yes to toolrun's
# question whether to log in, and whose $BROWSER follows the authorization server's redirect
# back to toolrun's listener, as a browser would. Any other scenario is
# refused with exit 2.
set -euo pipefail

url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the conformance suite names the scenario in MCP_CONFORMANCE_SCENARIO}"
bin="${TOOLRUN_BIN:-toolrun}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

tools='"*"'
extra=''
secrets=''
login=''
# The calls to make, one a line: the tool, a tab, its arguments (JSON).
calls=''
context_calls() {
  # Null arguments are left out: the tools' schemas do not allow null, and an argument left out
  # is what the scenario checks is not mirrored into a header.
  node -e 'for (const c of JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT).toolCalls) {
    const a = Object.fromEntries(Object.entries(c.arguments).filter(([, v]) => v !== null));
    console.log(c.name + "\t" + JSON.stringify(a));
  }'
}
case "$scenario" in
  initialize | request-metadata | json-schema-ref-no-deref) ;;
  tools_call) calls=$'add_numbers\t{"a": 2, "b": 3}' ;;
  sse-retry) calls=$'test_reconnection\t{}' ;;
  elicitation-sep1034-client-defaults)
    calls=$'test_client_elicitation_defaults\t{}'
    extra='    elicitation: defaults' ;;
  sep-2322-client-request-state)
    calls=$'test_mrtr_echo_state\t{}\ntest_mrtr_no_state\t{}\ntest_mrtr_unrelated\t{}\ntest_mrtr_no_result_type\t{}' ;;
  http-standard-headers) calls=$'test_headers\t{}\nmy-hyphenated-tool\t{}' ;;
  http-custom-headers) calls="$(context_calls)" ;;
  http-invalid-tool-headers) calls=$'valid_tool\t{"region": "us-west1"}' ;;
  auth/*)
    calls=$'test-tool\t{}'
    field() {
      [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ] || return 0
      node -e 'const c = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT); process.stdout.write(c[process.argv[1]] || "")' "$1"
    }
    CONFORMANCE_CLIENT_ID="$(field client_id)"
    CONFORMANCE_CLIENT_SECRET="$(field client_secret)"
    CONFORMANCE_PRIVATE_KEY="$(field private_key_pem)"
    export CONFORMANCE_CLIENT_ID CONFORMANCE_CLIENT_SECRET CONFORMANCE_PRIVATE_KEY
    extra=$'    auth:\n      oauth:\n'
    names=()
    for key in client_id client_secret private_key; do
      name="CONFORMANCE_${key^^}"
      if [ -n "${!name}" ]; then
        names+=("$name")
        extra+="        $key: \"{{ secrets.$name }}\""$'\n'
      fi
    done
    [ "$scenario" = auth/basic-cimd ] && extra+=$'        client_metadata_url: https://conformance-test.local/client-metadata.json\n'
    case "$scenario" in
      auth/client-credentials-*) extra+=$'        grant: client_credentials\n' ;;
      *) login=yes; extra+=$'        grant: authorization_code\n' ;;
    esac
    secrets="secrets: [$(IFS=,; echo "${names[*]:-}")]"
    export XDG_STATE_HOME="$dir/state" ;;
  *)
    echo "toolrun's conformance client does not take part in scenario \`$scenario\`" >&2
    exit 2 ;;
esac

cat > "$dir/conformance.yaml" <<EOF
version: 1
name: conformance
$secrets
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
if [ -z "$calls" ]; then
  exec "$bin" run "$dir/conformance.yaml" --query "connect"
fi
if [ -n "$login" ]; then
  cat > "$dir/browser.sh" <<'EOF'
exec node -e 'fetch(process.argv[1]).then((r) => r.text()).then(() => process.exit(0), (e) => { console.error(e); process.exit(1); })' "$1"
EOF
  export BROWSER="bash $dir/browser.sh"
fi
call() {
  if [ -z "$login" ]; then
    "$bin" call "$dir/conformance.yaml" "$1" --args "$2"
    return
  fi
  printf 'exec %q call %q %q --args %q\n' "$bin" "$dir/conformance.yaml" "$1" "$2" > "$dir/call.sh"
  # The person answers yes when toolrun asks whether to log in (typed ahead: the terminal keeps
  # the line until the question reads it).
  printf 'y\n' | env -u CI script -qec "bash $dir/call.sh" /dev/null
}
status=0
while IFS=$'\t' read -r tool args; do
  call "$tool" "$args" || status=$?
done <<< "$calls"
exit "$status"
