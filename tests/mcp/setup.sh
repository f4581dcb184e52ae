#!/usr/bin/env bash
# Creates the Python venv the MCP interop tests drive (the official SDK, PyPI `mcp`), once:
# a venv that already imports the pinned packages is left alone, so repeated calls are instant.
# Concurrent test binaries take turns through a lock. pip's own cache makes a re-create quick.
set -euo pipefail
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "$want" > "$venv/.requirements"
