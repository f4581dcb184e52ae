#!/usr/bin/env bash
# The logic of the toolrun GitHub Action (action.yml): install toolrun unless the wanted version
# is already on PATH, run `toolrun test` on the specs with GitHub annotations, put the markdown
# report in the job summary and the results file's path in the step's outputs.
#
# Inputs come as environment variables, as GitHub passes them to a composite action's step, so
# the tests run this script outside GitHub with a fake GITHUB_STEP_SUMMARY and GITHUB_OUTPUT:
#   INPUT_VERSION   toolrun version to use; empty: whatever `toolrun` is on PATH, else the latest
#   INPUT_SPECS     spec files, folders or globs, separated by spaces (default: specs)
#   INPUT_ARGS      more arguments for `toolrun test`, separated by spaces (e.g. --partition 1/4)
#   INPUT_BASELINE  a results file to compare with (`toolrun test --baseline`), optional
#   INPUT_RESULTS   where to write the results file (default: $RUNNER_TEMP/toolrun-results.json)
# Exit status: toolrun's (0 all passed, 1 a test failed, 2 usage error); 2 when installing fails.
set -uo pipefail

version="${INPUT_VERSION:-}"
version="${version#v}"
tmp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"

# GitHub's runner takes a line of the log that starts with `::` (after blanks) or holds `##[`
# anywhere as a workflow command. What this script prints holds paths, globs' matches and
# inputs, so it goes through these: a zero-width space parts `##[`.
zwsp=$'\xe2\x80\x8b'

# One line of the log, starting with the script's own words: CR and LF shown as \r and \n (the
# runner starts a line at either), `##[` parted.
say() {
  local text="$*"
  text="${text//$'\r'/\\r}"
  text="${text//$'\n'/\\n}"
  printf '%s\n' "${text//'##['/#${zwsp}#[}"
}

# Each line of stdin through `say` (the messages of pip and `toolrun report`, which quote
# inputs); to stderr, where they were going.
say_lines() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    say "$line" >&2
  done
}

# The message of a workflow command: `%`, CR and LF percent-escaped (GitHub's escaping for
# command data), `##[` parted.
command_data() {
  local text="$*"
  text="${text//'%'/%25}"
  text="${text//$'\r'/%0D}"
  text="${text//$'\n'/%0A}"
  printf '%s' "${text//'##['/#${zwsp}#[}"
}

fail() {
  echo "::error title=toolrun action::$(command_data "$*")"
  exit 2
}

# Sets the step output NAME to VALUE in the `NAME<<DELIMITER` form: a newline in VALUE (a
# path may hold one) cannot add outputs of its own, and the delimiter is random, so VALUE
# cannot end it early.
set_output() {
  local name="$1" value="$2" delimiter
  delimiter="toolrun_$(od -An -N16 -tx1 /dev/urandom 2>/dev/null | tr -d ' \n')"
  [ "$delimiter" != "toolrun_" ] || delimiter="toolrun_$RANDOM$RANDOM$RANDOM$RANDOM$RANDOM"
  while [[ "$value" == *"$delimiter"* ]]; do
    delimiter="${delimiter}_$RANDOM"
  done
  printf '%s<<%s\n%s\n%s\n' "$name" "$delimiter" "$value" "$delimiter" >>"$GITHUB_OUTPUT"
}

# A toolrun of the wanted version already on PATH is used as it is; anything else installs the
# PyPI wheel (`pip install toolrun==VERSION`) into a venv of its own, so the job's Python is
# left alone. Sets `toolrun`.
find_toolrun() {
  if command -v toolrun >/dev/null 2>&1; then
    local have
    have="$(toolrun --version 2>/dev/null)" || have=""
    if [ -z "$version" ] || [ "$have" = "toolrun $version" ]; then
      toolrun="$(command -v toolrun)"
      return 0
    fi
    say "toolrun on PATH is \`$have\`, not $version: installing toolrun==$version"
  fi
  local python venv requirement
  python="$(command -v python3 || command -v python)" || fail "installing toolrun needs python3 (actions/setup-python) or a toolrun on PATH"
  venv="$tmp/toolrun-action-venv"
  requirement="toolrun${version:+==$version}"
  "$python" -m venv "$venv" || fail "cannot create a Python venv in $venv"
  local bin="$venv/bin"
  [ -d "$bin" ] || bin="$venv/Scripts"
  "$bin/python" -m pip install --quiet --disable-pip-version-check "$requirement" 2>&1 \
    | say_lines || fail "pip install $requirement failed"
  toolrun="$bin/toolrun"
  [ -x "$toolrun" ] || toolrun="$bin/toolrun.exe"
  [ -x "$toolrun" ] || fail "pip installed $requirement without a toolrun binary"
}

toolrun=""
find_toolrun
say "Using $("$toolrun" --version) from $toolrun"

# Word-split the lists as the documentation says; a word with glob characters is expanded, and
# one that matches nothing is passed as it is (toolrun then names it).
shopt -s nullglob
specs=()
read -r -a words <<<"${INPUT_SPECS:-specs}"
for word in "${words[@]}"; do
  if [[ "$word" == *[*?[]* ]]; then
    # shellcheck disable=SC2206 # unquoted on purpose: this is the glob expansion
    matches=($word)
    if [ ${#matches[@]} -gt 0 ]; then
      specs+=("${matches[@]}")
      continue
    fi
  fi
  specs+=("$word")
done
shopt -u nullglob
read -r -a extra <<<"${INPUT_ARGS:-}"

results="${INPUT_RESULTS:-$tmp/toolrun-results.json}"
command=("$toolrun" test "${specs[@]}" --format github --results "$results")
if [ -n "${INPUT_BASELINE:-}" ]; then
  if ! "$toolrun" test --help 2>/dev/null | grep -q -- '--baseline'; then
    fail "the baseline input needs a toolrun with \`toolrun test --baseline\`; $("$toolrun" --version) has none"
  fi
  command+=(--baseline "$INPUT_BASELINE")
fi
command+=("${extra[@]}")

say "+ ${command[*]}"
"${command[@]}"
status=$?

if [ -f "$results" ]; then
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    set_output results "$results"
  fi
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    # stdout to the summary, stderr through `say_lines`.
    "$toolrun" report "$results" --format markdown 2>&1 >>"$GITHUB_STEP_SUMMARY" | say_lines \
      || echo "::warning title=toolrun action::could not write the job summary"
  fi
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  set_output exit-code "$status"
fi
exit "$status"
