#!/usr/bin/env bash
# Creates a Python venv the interop tests drive, once: by default the MCP one (the official SDK,
# PyPI `mcp`, from requirements.txt here); a second argument names another requirements file
# (tests/fastapi/requirements.txt). A venv that already holds the pinned packages is left alone,
# so repeated calls are instant. Concurrent test binaries take turns through a lock. pip's own
# cache makes a re-create quick.
set -euo pipefail
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
requirements="${2:-$here/requirements.txt}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" > "$venv/.requirements"
