#!/usr/bin/env sh
# Runs each fuzz target for a bounded time, one after another (a 2-core machine gains nothing
# from running them side by side).
#
#   fuzz/run.sh            # 60 s per target
#   fuzz/run.sh 600        # 10 min per target
#   fuzz/run.sh 30 calculator templates
#
# Needs `cargo install cargo-fuzz` and a nightly toolchain. New inputs are added to
# fuzz/corpus/<target>/ (shrink with `cargo +nightly fuzz cmin -s none <target>` before
# committing); crashes land in fuzz/artifacts/<target>/ and the script stops with their path.
set -eu
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-spec_compile model_response calculator builtins templates masker}
cd "$(dirname "$0")/.."
# Instrumented nightly builds keep to fuzz/target rather than the main crate's target dir.
unset CARGO_TARGET_DIR
for t in $targets; do
    dict=""
    [ -f "fuzz/dict/$t.dict" ] && dict="-dict=fuzz/dict/$t.dict"
    echo "== $t (${secs}s)"
    # `-s none`: toolrun is safe Rust, so AddressSanitizer would only halve the exec rate;
    # debug assertions (overflow checks) stay on. `-timeout` turns a hang into a crash.
    cargo +nightly fuzz run -s none "$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $dict
done
