#!/usr/bin/env bash
# Benchmark of `toolrun check` with the release binary: a generated spec of 1,000 tools of
# mixed kinds (mock, table, builtin, http with templates and input schemas), and a small spec.
# Not a test and not run in CI: timings depend on the machine.
#
#   benches/check_bench.sh [RUNS]      (default 20 runs per spec)
set -euo pipefail

runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
bin=$target/release/toolrun

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

generate() { # $1 = number of tools
    local n=$1 i
    echo "version: 1"
    echo "name: bench"
    echo "secrets: [API_KEY]"
    echo "policy:"
    echo "  network: { allow_hosts: [api.example.com] }"
    echo "tools:"
    for ((i = 0; i < n; i++)); do
        case $((i % 4)) in
        0) cat <<YAML
  mock_$i:
    description: Returns the simulated price number $i for a ticker symbol.
    kind: mock
    input:
      type: object
      properties:
        ticker: { type: string, description: "Ticker symbol", minLength: 1 }
        currency: { type: string, enum: [USD, EUR], default: USD }
      required: [ticker]
      additionalProperties: false
    responses:
      - when: { ticker: AAPL }
        result: { price: 178.15, note: "price of {{ args.ticker }} in {{ args.currency }}" }
      - error: { kind: not_found, message: "unknown ticker {{ args.ticker }}" }
YAML
        ;;
        1) cat <<YAML
  table_$i:
    description: Looks up rows of candidates table number $i.
    kind: table
    rows:
      - { name: Alice Johnson, email: alice@example.com, stage: onsite }
      - { name: Bob Stone, email: bob@example.com, stage: screen }
YAML
        ;;
        2) cat <<YAML
  builtin_$i:
    description: Evaluates arithmetic expressions safely, copy $i.
    kind: builtin
    builtin: calculator
YAML
        ;;
        3) cat <<YAML
  http_$i:
    description: Current weather for a city from weather service $i.
    kind: http
    input:
      type: object
      properties:
        city: { type: string, description: "City name" }
        units: { type: string, enum: [metric, imperial] }
      required: [city]
    request:
      method: GET
      url: "https://api.example.com/v1/weather/$i?city={{ args.city | urlencode }}"
      query: { units: "{{ args.units or 'metric' }}" }
      headers: { Authorization: "Bearer {{ secrets.API_KEY }}" }
    response: { pointer: /current }
    timeout: 5s
    retries: 2
YAML
        ;;
        esac
    done
}

measure() { # $1 = label, $2 = spec
    local label=$1 spec=$2 i start end ms total=0 min=
    "$bin" check --deny-warnings "$spec" 2>/dev/null || { "$bin" check "$spec"; exit 1; }
    for ((i = 0; i < runs; i++)); do
        start=$(date +%s%N)
        "$bin" check "$spec" 2>/dev/null
        end=$(date +%s%N)
        ms=$(((end - start) / 1000))
        total=$((total + ms))
        if [[ -z $min || $ms -lt $min ]]; then min=$ms; fi
    done
    awk -v l="$label" -v t="$total" -v n="$runs" -v m="$min" -v b="$(wc -c <"$spec")" \
        'BEGIN { printf "%-28s mean %7.2f ms   min %7.2f ms   (%d runs, %d bytes)\n", l, t / n / 1000, m / 1000, n, b }'
}

generate 1000 >"$work/large.yaml"
measure "1,000 tools (mixed kinds)" "$work/large.yaml"
measure "specs/stock_assistant.yaml" "$root/specs/stock_assistant.yaml"
measure "specs/recruiting.yaml" "$root/specs/recruiting.yaml"
