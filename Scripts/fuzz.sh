#!/usr/bin/env bash
# Builds the fuzz targets in Fuzz/ with libFuzzer (-sanitize=fuzzer) and runs each for a bounded time,
# starting from its committed corpus in Fuzz/Corpus/<target> (which is replayed first, so every
# input that once crashed stays a regression test).
#   bash Scripts/fuzz.sh                  every target, 30 s each
#   bash Scripts/fuzz.sh 600 FuzzCacheFile one target, 10 minutes
# A crash stops the run with a non-zero exit; its input is written to .build-fuzz/artifacts/. Add it
# to Fuzz/Corpus/<target>/ once fixed. New inputs the fuzzer finds go to .build-fuzz/corpus/<target>/
# (copy the useful ones into Fuzz/Corpus/ by hand). Prints the executions of each target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
all=(FuzzRetryAfter FuzzServerMessage FuzzKeyPathDecoding FuzzCacheFile FuzzQueryEncoding FuzzPathTemplate FuzzCredentialStore
    FuzzLinkHeader FuzzLenientMapping FuzzSetCookie FuzzMultipart
    FuzzServerSentEvents FuzzJSONLines FuzzContentRange FuzzHeaderFields FuzzCertificate)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all[@]}"); fi

# Each target is a static library defining LLVMFuzzerTestOneInput, built (with the library it
# tests) with coverage instrumentation, then linked with libFuzzer's own main.
swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer --scratch-path .build-fuzz
lib=$(swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer --scratch-path .build-fuzz --show-bin-path)
foundation=(-lFoundation -lFoundationNetworking)
if [[ "$(uname)" == Linux ]]; then foundation+=(-lFoundationEssentials); fi
for target in "${targets[@]}"; do
    swiftc -sanitize=fuzzer -emit-executable "$lib/lib$target.a" "${foundation[@]}" -o ".build-fuzz/$target"
done
mkdir -p .build-fuzz/artifacts
# Swift's own backtracer would catch the crash first and exit before libFuzzer saves the input.
for target in "${targets[@]}"; do
    work=.build-fuzz/corpus/$target
    mkdir -p "$work"
    log=.build-fuzz/$target.log
    echo "== fuzz $target for ${seconds}s"
    if ! SWIFT_BACKTRACE=enable=no ".build-fuzz/$target" "$work" "Fuzz/Corpus/$target" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix=".build-fuzz/artifacts/$target-" > "$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz target $target crashed; its input is in .build-fuzz/artifacts/" >&2
        exit 1
    fi
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
    echo "fuzz $target: $runs executions in ${seconds}s, no crash"
done
