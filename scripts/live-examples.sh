#!/usr/bin/env bash
# toolrun's live examples against real model servers: llama-cpp-python's OpenAI-compatible
# server with a real small model, and LiteLLM's Anthropic Messages and OpenAI Responses proxies
# in front of it (all from ../shared/real-servers, set up once with their `setup` command). Not part of .ci/run:
# it takes minutes. Runs specs/real_servers.yaml through each provider — a real tool loop,
# streaming and not, tool_choice variants — records fixtures, stops the servers, and replays
# the fixtures offline. Then the spec's `tests:` run as CI would run them against a model:
# `toolrun test --model NAME --record missing` once per provider (one fixture set per model,
# under fixtures/real_servers/{model}), replayed offline after the servers stop, and one
# `toolrun report` over both results files. Exit 0 when every check holds.
#
#   scripts/live-examples.sh
#   REAL_SERVERS=/path/to/real-servers LLM_PORT=18090 ANTH_PORT=18091 RESP_PORT=18095 \
#       scripts/live-examples.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
servers=${REAL_SERVERS:-$repo/../shared/real-servers}
llm_port=${LLM_PORT:-18090}
anth_port=${ANTH_PORT:-18091}
resp_port=${RESP_PORT:-18095}
query="What is the price of AAPL?"

[ -x "$servers/llm_server.sh" ] || { echo "no real-server scripts in $servers (set REAL_SERVERS)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }

work=$(mktemp -d /tmp/toolrun-live.XXXXXX)
echo "work directory: $work"
cargo build -q --manifest-path "$repo/Cargo.toml"
# A copy: a rebuild in the repository during the run must not swap the binary under it.
bin=$work/toolrun
cp "$repo/target/debug/toolrun" "$bin"
# The copy keeps the repository's layout (specs/, fixtures/) under $work, the project root of
# every command here, so the tests' fixtures land in $work/fixtures/real_servers/MODEL.
mkdir -p "$work/specs"
spec=$work/specs/real_servers.yaml
sed -e "s#127.0.0.1:18090#127.0.0.1:$llm_port#g" -e "s#127.0.0.1:18091#127.0.0.1:$anth_port#g" \
    -e "s#127.0.0.1:18095#127.0.0.1:$resp_port#g" \
    "$repo/specs/real_servers.yaml" > "$spec"
"$bin" check --root "$work" "$spec"

export LOCAL_LLM_KEY=sk-local-test LOCAL_ANTH_KEY=sk-anth-test LOCAL_RESP_KEY=sk-resp-test
llm_pid= ; anth_pid= ; resp_pid=
stop_servers() {
    [ -n "$resp_pid" ] && "$servers/responses_proxy.sh" stop "$resp_pid" >/dev/null 2>&1 || true
    [ -n "$anth_pid" ] && "$servers/anthropic_proxy.sh" stop "$anth_pid" >/dev/null 2>&1 || true
    [ -n "$llm_pid" ] && "$servers/llm_server.sh" stop "$llm_pid" >/dev/null 2>&1 || true
    resp_pid= ; anth_pid= ; llm_pid=
}
trap stop_servers EXIT
echo "starting the model server on $llm_port, the Anthropic proxy on $anth_port and the Responses proxy on $resp_port ..."
llm_pid=$(LLM_API_KEY=$LOCAL_LLM_KEY "$servers/llm_server.sh" start "$llm_port")
anth_pid=$(UPSTREAM_API_KEY=$LOCAL_LLM_KEY ANTH_PROXY_KEY=$LOCAL_ANTH_KEY \
    "$servers/anthropic_proxy.sh" start "$anth_port" "http://127.0.0.1:$llm_port/v1")
resp_pid=$(UPSTREAM_API_KEY=$LOCAL_LLM_KEY RESP_PROXY_KEY=$LOCAL_RESP_KEY \
    "$servers/responses_proxy.sh" start "$resp_port" "http://127.0.0.1:$llm_port/v1")

failures=0
# run NAME MODEL [toolrun args...]: the trace in $work/NAME.json, events in NAME.events.
run() {
    local name=$1 model=$2; shift 2
    local started=$SECONDS
    "$bin" run --root "$work" "$spec" --model "$model" --query "$query" --json \
        --events "$work/$name.events" "$@" > "$work/$name.json" 2> "$work/$name.err" || true
    echo "== $name ($model, $((SECONDS - started))s)"
    python3 - "$work/$name.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
calls = [(r["name"], r.get("arguments"), r.get("result")) for r in t.get("tool_results", [])]
print(f"   status={t['status']} stop={t['stop_reason']} calls={calls}")
print(f"   answer={t.get('final_output')!r} error={t.get('error')!r} usage={t.get('usage', {}).get('input_tokens')}/{t.get('usage', {}).get('output_tokens')}")
PY
}
# expect NAME PYTHON-CONDITION DESCRIPTION: `t` is the trace, `ev` the list of events.
expect() {
    if python3 - "$work/$1.json" "$work/$1.events" "$2" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
calls = t.get("tool_results", [])
# The text of the last model call (an earlier, rejected reply streams too).
last = max([i for i, e in enumerate(ev) if e["event"] == "model_http_request"] or [0])
deltas = "".join(e.get("text", "") for e in ev[last:] if e["event"] == "model_text_delta")
sys.exit(0 if eval(sys.argv[3]) else 1)
PY
    then echo "   ok: $3"; else echo "   FAILED: $3"; failures=$((failures + 1)); fi
}

# OpenAI-compatible server. Without tool_choice it would ignore the tools; with `auto` sent it
# calls the tool, but never sees tool results, so it calls again until the step limit.
run local local --record "$work/local.fixture.json"
expect local 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["status"] == "ok"' "auto: a real tool call, run through the loop"
expect local 'all(c["arguments"].get("ticker") for c in calls)' "auto: the arguments match the tool's schema"

run local_forced local_forced
expect local_forced 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["status"] == "ok"' "forced tool: the server constrains the call to the schema"

run local_none local_none
expect local_none 't["status"] == "ok" and not calls and t["final_output"]' "none: a text answer, no tool call"

run local_none_stream local_none_stream --record "$work/local_stream.fixture.json"
expect local_none_stream 't["status"] == "ok" and t["final_output"]' "streamed none: a text answer"
expect local_none_stream 't["final_output"] and deltas.strip() == t["final_output"].strip()' "streamed none: the text arrived as deltas"
python3 - "$work/local_none.json" "$work/local_none_stream.json" <<'PY' && echo "   ok: streamed and plain answers are the same text (temperature 0)" || { echo "   FAILED: streamed and plain answers differ"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p))["final_output"] for p in sys.argv[1:3])
sys.exit(0 if a == b else 1)
PY

run local_forced_stream local_forced_stream
expect local_forced_stream 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["arguments"].get("ticker")' "streamed forced tool: llama.cpp's repeated-id chunks make one call with whole arguments"

run local_required local_required
expect local_required 't["status"] != "ok" and "500" in (t.get("error") or "")' "required: the server's HTTP 500 is reported with its status"

# Anthropic Messages through LiteLLM: tool_use, tool_result, then an answer.
run claude claude_local --record "$work/claude.fixture.json"
expect claude 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["status"] == "ok"' "anthropic auto: a real tool_use, run through the loop"
expect claude 't["status"] == "ok" and t["final_output"]' "anthropic auto: the loop ends with an answer"
expect claude 't["usage"]["input_tokens"] > 0 and t["usage"]["output_tokens"] > 0' "anthropic: usage is counted"

run claude_none_stream claude_none_stream --record "$work/claude_stream.fixture.json"
expect claude_none_stream 't["status"] == "ok" and t["final_output"] and deltas.strip() == t["final_output"].strip()' "anthropic streamed none: text deltas make the answer"
expect claude_none_stream 't["usage"]["output_tokens"] > 0' "anthropic streamed: usage from message_delta"

# The OpenAI Responses API through LiteLLM: function_call, function_call_output, an answer;
# stateless requests (store: false, encrypted reasoning asked for, no previous_response_id).
bodies='[e["body"] for e in ev if e["event"] == "model_http_request"]'
run resp resp_local --record "$work/resp.fixture.json"
expect resp 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["status"] == "ok"' "responses auto: a real function_call, run through the loop"
expect resp 't["status"] == "ok" and t["final_output"]' "responses auto: the loop ends with an answer"
expect resp "all(b['store'] is False and b['include'] == ['reasoning.encrypted_content'] and 'previous_response_id' not in b for b in $bodies)" "responses: stateless requests"
expect resp "any(i.get('type') == 'function_call_output' for i in $bodies[-1]['input'])" "responses: the tool result went back as a function_call_output item"
expect resp 't["usage"]["input_tokens"] > 0 and t["usage"]["output_tokens"] > 0' "responses: usage is counted"
run resp_forced resp_forced
expect resp_forced 'calls and calls[0]["name"] == "get_stock_price" and calls[0]["arguments"].get("ticker")' "responses forced tool: a function_call with the schema's arguments"
expect resp_forced "$bodies[0]['tool_choice'] == {'type': 'function', 'name': 'get_stock_price'}" "responses forced tool: tool_choice in the Responses shape"
run resp_none_stream resp_none_stream --record "$work/resp_stream.fixture.json"
expect resp_none_stream 't["status"] == "ok" and t["final_output"] and deltas.strip() == t["final_output"].strip()' "responses streamed: response.output_text.delta events make the answer"

# A reply cut at max_tokens: the partial text is kept for review, and not asked for again.
requests='len([e for e in ev if e["event"] == "model_http_request"]) == 1'
run local_cut local_cut
expect local_cut 't["status"] == "needs_review" and t["stop_reason"] == "max_tokens" and t["final_output"] and "max_tokens" in t["error"]' "cut off (finish_reason: length): the partial answer, needs_review, stop max_tokens"
expect local_cut "$requests" "cut off: one request, no retry"
run claude_cut_stream claude_cut_stream
expect claude_cut_stream 't["status"] == "needs_review" and t["stop_reason"] == "max_tokens" and t["final_output"] and deltas.strip() == t["final_output"].strip()' "anthropic streamed cut off (stop_reason: max_tokens): the streamed partial answer, needs_review"
expect claude_cut_stream "$requests" "anthropic cut off: one request, no retry"

run claude_forced_stream claude_forced_stream
# The proxy sometimes streams a forced call as one empty text block (nothing from upstream):
# then there is nothing to read, and the run says so; when tool_use blocks come, they must
# make one whole call.
expect claude_forced_stream '(calls and calls[0]["name"] == "get_stock_price" and calls[0]["arguments"].get("ticker")) or (not any("tool_use" in str(e.get("body")) for e in ev if e["event"] == "model_http_response") and "empty reply" in (t.get("error") or ""))' "anthropic streamed forced tool: LiteLLM's one-block-per-fragment stream makes one call (or, when the proxy streams no tool_use at all, an empty reply is reported)"

# The spec's tests against each provider, recording one fixture per test and model. A test may
# fail (the 135M model never sees a tool result through llama.cpp's `auto`); what must hold is
# that every test ran live, was recorded, and has its verdict in the results.
for model in local claude_local; do
    started=$SECONDS
    # One job: the server answers one request at a time, and time spent waiting for the
    # model's `max_concurrency` counts toward a run's `run_timeout`.
    "$bin" test --root "$work" "$spec" --model "$model" --record missing --jobs 1 \
        --results "$work/$model.results.json" > "$work/$model.test" 2>&1 || true
    echo "== toolrun test --model $model --record missing ($((SECONDS - started))s)"
    sed 's/^/   /' "$work/$model.test"
    if python3 - "$work/$model.results.json" "$work/fixtures/real_servers/$model" <<'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
tests = doc["tests"]
ok = bool(tests) and all(a["source"] == "record" and a.get("status") for t in tests for a in t["attempts"])
ok = ok and all(os.path.isfile(os.path.join(sys.argv[2], t["name"] + ".json")) for t in tests)
sys.exit(0 if ok else 1)
PY
    then echo "   ok: every test ran live and wrote fixtures/real_servers/$model/<test>.json"
    else echo "   FAILED: not every test was recorded"; failures=$((failures + 1)); fi
done

# Offline: the servers stop, the recordings replay.
stop_servers
echo "== servers stopped; replaying the recordings offline"
# The tests: the default model's fixtures by a plain `test`, the other's by `--record missing`
# (every fixture exists, so nothing goes live). The verdicts must be the recorded ones.
for model in local claude_local; do
    args=()
    [ "$model" = local ] || args=(--model "$model" --record missing)
    "$bin" test --root "$work" "$spec" "${args[@]}" --results "$work/$model.replay.json" \
        > "$work/$model.replay" 2>&1 || true
    if python3 - "$work/$model.results.json" "$work/$model.replay.json" <<'PY'
import json, sys
live, again = (json.load(open(p)) for p in sys.argv[1:3])
verdicts = lambda d: [(t["name"], t["outcome"]) for t in d["tests"]]
replayed = all(a["source"] == "replay" for t in again["tests"] for a in t["attempts"])
diverged = [f for t in again["tests"] for a in t["attempts"] for f in a.get("failures", []) if f["kind"] != "assertion"]
sys.exit(0 if replayed and not diverged and verdicts(live) == verdicts(again) else 1)
PY
    then echo "   ok: the $model tests replay offline with the recorded verdicts"
    else echo "   FAILED: the $model tests do not replay as recorded:"; sed 's/^/     /' "$work/$model.replay"
        failures=$((failures + 1)); fi
done
"$bin" report "$work/local.results.json" "$work/claude_local.results.json" -o "$work/report.html"
"$bin" report "$work/local.results.json" "$work/claude_local.results.json" --format markdown \
    > "$work/report.md"
# (markdown escapes `_`: look for the summary row, and for the model in the page's data)
if grep -q "tests passed" "$work/report.md" && grep -q claude_local "$work/report.html"; then
    echo "   ok: toolrun report over both models: $work/report.html"; sed 's/^/     /' "$work/report.md"
else echo "   FAILED: the report does not show both models"; failures=$((failures + 1)); fi

for f in local local_stream claude claude_stream resp resp_stream; do
    if "$bin" replay --root "$work" "$work/$f.fixture.json" > "$work/$f.replay" 2>&1; then
        echo "   ok: $f.fixture.json replays"
    else
        echo "   FAILED: $f.fixture.json does not replay:"; sed 's/^/     /' "$work/$f.replay"
        failures=$((failures + 1))
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "live examples: $failures check(s) failed (traces in $work)"
    exit 1
fi
echo "live examples: every check passed (traces in $work)"
