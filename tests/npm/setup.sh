#!/usr/bin/env bash
# Installs the pinned npm packages the interop tests drive (package.json and package-lock.json
# here: the official MCP conformance suites (0.1.16 for 2025-11-25, 0.2.0-alpha.12 as
# `conformance-2026` for 2026-07-28), the reference servers, the Inspector, oidc-provider (a real
# OAuth authorization server) and Node 22 as
# an npm package) into DIR/node_modules, once. A folder that already holds this lock's packages
# is left alone, so repeated calls are instant; concurrent test binaries take turns through a
# lock. npm's own cache makes a re-install quick.
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9
want="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ -d "$dir/node_modules" ] && [ "$(cat "$dir/.installed" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
rm -rf "$dir/node_modules" "$dir/.installed"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 || { cat npm.log >&2; exit 1; }
# `node@22` (the Inspector needs Node >= 22) is a real Node binary shipped in an npm package.
"$dir/node_modules/.bin/node" --version >/dev/null
echo "$want" > "$dir/.installed"
