#!/usr/bin/env bash
# The whole test suite, as README.md gives it: `bash Scripts/test.sh`.
# It needs nothing but a Swift 6 toolchain; it installs whatever else it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Formatting: swift format lint (configuration in .swift-format)"
swift format lint --strict -r Sources Tests Playground Benchmarks/Benchmarks Benchmarks/Sources Package.swift \
    Fuzz/Sources Fuzz/Package.swift Transports/AsyncHTTPClient/Sources Transports/AsyncHTTPClient/Package.swift \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/TransportUnderTest.swift \
    Transports/AsyncHTTPClient/DurableLineChild/ChildTransport.swift \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/LifecycleTests.swift \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/CodeSamplesTests.swift \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/DecidedDifferencesTests.swift \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/BusyThreadPoolTests.swift \
    Transports/AsyncHTTPClient/Playground/LiveTransports.swift \
    Transports/AsyncHTTPClient/Benchmarks/HTTPBenchmarkAHC/ExtraClients.swift \
    Transports/AsyncHTTPClient/Benchmarks/TransferBenchmark \
    Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/ObservedTransport.swift \
    Integrations/Observability/Sources Integrations/Observability/Tests Integrations/Observability/Package.swift

echo "== The scheduling machine owns its state: written only in Sources/APIManagerKit/Scheduling/Machine/"
python3 Scripts/check-machine-state.py
echo "== The privacy manifest: parsed, true to the code, and the check able to fail"
python3 Scripts/check-privacy-manifest.py
privacy_scratch=$(mktemp -d)
python3 - "$privacy_scratch" <<'PY'
import plistlib, sys
manifest = plistlib.load(open("Sources/APIManagerKit/PrivacyInfo.xcprivacy", "rb"))
manifest["NSPrivacyAccessedAPITypes"] = []
plistlib.dump(manifest, open(sys.argv[1] + "/lacking.xcprivacy", "wb"))
PY
printf '<plist><dict><key>x</key>' > "$privacy_scratch/broken.xcprivacy"
for broken in lacking broken; do
    if python3 Scripts/check-privacy-manifest.py "$privacy_scratch/$broken.xcprivacy" > /dev/null 2>&1; then
        echo "check-privacy-manifest.py accepted a $broken manifest" >&2
        exit 1
    fi
done
rm -rf "$privacy_scratch"

echo "== Documentation: every public symbol documented, DocC catalogs built with warnings as errors"
bash Scripts/docs.sh

echo "== Public API: no break against the baseline Scripts/api-baseline names, but those listed as deliberate"
bash Scripts/check-api.sh

# Swift Testing starts every test of a run at once unless told otherwise: ~600 unit tests under
# ThreadSanitizer on 2 busy cores waited for the 2 threads of Swift's cooperative pool, and trivial
# ones ran past their time limits. The unit passes run one test at a time (their time then is their
# own work: 17 s plain, under a minute with ThreadSanitizer on a loaded machine); the integration
# passes, which mostly wait on a real server, at most 4 at a time. Override with the variable.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-4}"
unit_width="${APIMANAGERKIT_UNIT_TEST_WIDTH:-1}"

log=$(mktemp)
trap 'rm -f "$log" "$log.count" "$log.events"; bash Scripts/integration-server.sh stop' EXIT

echo "== Integration server: httpbin + fixtures under gunicorn on 127.0.0.1 (installed into .build-venv from PyPI)"
eval "$(bash Scripts/integration-server.sh start)"
echo "serving on $APIMANAGERKIT_TEST_SERVER and $APIMANAGERKIT_TEST_SERVER_2"
# Where the integration suite writes the sessions it records as HAR (checked below).
export APIMANAGERKIT_HAR_DIR="$PWD/.build-venv/har"
rm -rf "$APIMANAGERKIT_HAR_DIR"
mkdir -p "$APIMANAGERKIT_HAR_DIR"

echo "== Playground: build, run every story and check its timeline, reject an unknown argument"
swift build --product Playground
# Fails unless the output (first argument) contains every other argument.
expect_lines() {
    local output=$1
    shift
    for expected in "$@"; do
        if ! grep -qF "$expected" <<< "$output"; then
            echo "Playground output lacks: $expected" >&2
            exit 1
        fi
    done
}
# Each story must show its point in the timeline.
playground_output=$(swift run --skip-build Playground)
expect_lines "$playground_output" \
    "update quantity    starts" \
    'search "swift"     ends: 200' \
    "pull 2             ignored" \
    "open item 3        starts" \
    "flaky GET          starts attempt 3" \
    "reopen feed        shows the cached copy at once" \
    "   0.200s      token              refresh starts: the server refused \"expired\"" \
    "   0.700s  #3  cart badge         ends: 200" \
    "3 of 3 screens loaded after 1 refresh(es)" \
    "   0.200s      profile screen     shows Ada Lovelace, member since 1843" \
    "   0.700s      profile screen     shows an error: status 404" \
    '   1.100s  #1  type "s"           cancelled (policy)' \
    '   1.100s  #5  type "swift"       starts' \
    '   1.300s  #5  type "swift"       ends: 200' \
    "gallery            20 of 20 loaded, at most 4 at once" \
    "   0.200s  #2  save version 2     cancelled (policy)" \
    "   0.500s  #4  save version 4     starts" \
    "profile            2 screens answered, 1 request(s) on the wire" \
    "   0.800s  #4  load 4             fails at once: the circuit is open, nothing sent" \
    "   1.700s      circuit            closes: the probe succeeded" \
    "   0.500s  #1  photo              upload  25% (0.5 MiB)" \
    "   2.200s  #1  photo              ends: 201" \
    "photo              sent as multipart/form-data" \
    "   0.500s  #1  report.bin         failed (the connection dropped), retries in 0.300s" \
    "   1.100s  #1  report.bin         ends: 206" \
    "report.bin         4.0 MiB on disk after 2 attempts, the second asked for the rest only" \
    "feed               tick #5: event 5" \
    "feed               5 events, each once; the stream ended with a 204" \
    "   0.000s  #1  add tea            waits for the network" \
    "   0.500s      app                killed: 3 edits left on disk, none sent" \
    "   1.000s      app                relaunched: 3 edits restored, in order" \
    "   0.200s      cart banner        3 edits will be sent when you are back online" \
    "   1.000s      cart banner        3 edits will be sent when you are back online" \
    "   2.000s      cart banner        sending 3 edits" \
    "cart banner        sending 1 edit" \
    "   2.000s  #1  add tea            starts" \
    "   2.200s  #2  add cake           starts" \
    "   2.400s  #3  remove tea         starts" \
    "cart               3 of 3 edits sent, one attempt each, in order, with their first run's idempotency keys; 0 left on disk" \
    "   0.300s      cart screen        shows tea (on the main thread: yes)" \
    "   0.600s      cart screen        shows tea, cake (on the main thread: yes)" \
    "   1.000s      cart screen        shows an error: status 409 (on the main thread: yes)" \
    "cart               the screen shows 2 item(s), every answer heard on the main actor"
echo "== Playground against the real server (--base-url)"
# Every story's key lines in a live run ($1: the output, $2: the transport it names).
expect_live_stories() {
    expect_lines "$1" \
        "live: $APIMANAGERKIT_TEST_SERVER on $2" \
        "update quantity    starts" \
        'search "swift"     ends: 200' \
        "pull 2             ignored" \
        "flaky GET          starts attempt 2" \
        "reopen feed        ends: 200 from the cache, confirmed by a 304" \
        'refresh starts: the server refused "expired"' \
        "cart badge         ends: 200" \
        "3 of 3 screens loaded after 1 refresh(es)" \
        "profile screen     shows Ada Lovelace, member since 1843" \
        "profile screen     shows an error: status 404" \
        'type "s"           cancelled (policy)' \
        'type "swift"       ends: 200' \
        "gallery            20 of 20 loaded, at most 4 at once" \
        "save version 2     cancelled (policy)" \
        "save version 4     ends: 200" \
        "profile            2 screens answered, 1 request(s) on the wire" \
        "load 4             fails at once: the circuit is open, nothing sent" \
        "circuit            closes: the probe succeeded" \
        "photo              upload 100% (2.0 MiB)" \
        "photo              ends: 200" \
        "photo              sent as multipart/form-data" \
        "report.bin         failed (the connection dropped)" \
        "report.bin         ends: 206" \
        "report.bin         4.0 MiB on disk after 2 attempts, the second asked for the rest only" \
        "feed               fails: the connection dropped" \
        "feed               tick #5: event 5 / line two" \
        "feed               5 events, each once; the stream ended with a 204" \
        "app                killed: 3 edits left on disk, none sent" \
        "app                relaunched: 3 edits restored, in order" \
        "cart               3 of 3 edits sent, one attempt each, in order, with their first run's idempotency keys; 0 left on disk" \
        "cart screen        shows tea, cake (on the main thread: yes)" \
        "cart screen        shows an error: status 409 (on the main thread: yes)" \
        "cart               the screen shows 2 item(s), every answer heard on the main actor"
}
live_output=$(swift run --skip-build Playground --base-url "$APIMANAGERKIT_TEST_SERVER" \
    --record "$APIMANAGERKIT_HAR_DIR/playground.har")
echo "$live_output"
expect_live_stories "$live_output" urlsession
expect_lines "$live_output" "exchange(s) to $APIMANAGERKIT_HAR_DIR/playground.har"
if swift run --skip-build Playground --no-such-option > /dev/null 2>&1; then
    echo "Playground accepted an unknown argument" >&2
    exit 1
fi

echo "== The durable line's child process (killed and started again by DurableLineIntegrationTests)"
swift build --product DurableLineChild

echo "== Benchmarks: build only, so they keep compiling (run them as Benchmarks/README.md says)"
swift build --package-path Benchmarks

# The unit tests and the integration tests run as separate processes: the unit suite's stress tests
# keep both cores busy for seconds, and the integration suite checks real time (a cancelled
# request ends well before a slow server answers), which CPU starvation would make flaky.
# run_tests writes the number of tests the run executed to $log.count (0 without a closing line).
# Each pass also writes Swift Testing's event stream as it goes ($log.events), and runs under a time
# limit far beyond its work (40 minutes; the slowest pass, a ThreadSanitizer build and run of the
# AsyncHTTPClient package, takes about 10): a pass that fails, stalls (a test awaiting a
# continuation nobody resumes: seen once, in a pass whose buffered output did not name it) or
# crashes names the tests it started and never ended (Scripts/unfinished-tests.py).
pass_limit="${APIMANAGERKIT_TEST_PASS_LIMIT:-2400}"
run_tests() {
    local status=0
    rm -f "$log.events"
    timeout --kill-after=60 "$pass_limit" "$@" --event-stream-output-path "$log.events" --event-stream-version 0 \
        2>&1 | tee "$log" || status=$?
    grep -Eo 'Test run with [0-9]+ tests?' "$log" | grep -Eo '[0-9]+' | tail -1 > "$log.count" || echo 0 > "$log.count"
    if [ "$status" -ne 0 ]; then
        [ "$status" -ge 124 ] && echo "the pass was stopped after $pass_limit s (status $status): $*" >&2
        python3 Scripts/unfinished-tests.py "$log.events" >&2 || true
        return "$status"
    fi
}
skipped_integration() {
    grep -q 'skipped: "APIMANAGERKIT_TEST_SERVER is not set' "$log"
}
total=0

echo "== Unit tests"
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$unit_width run_tests swift test --skip APIManagerKitIntegrationTests
total=$((total + $(cat "$log.count")))

# The suites that move hundreds of MiB (uploads, downloads, progress, streams) run on their own
# after the rest: alongside them, the one-process test server answers the timing-sensitive tests
# (a stalled body refused within 3 s) seconds late. Progress runs alone after them: beside the other
# transfers, URLSession's one delegate queue delivered an upload's progress in one burst at the end.
# The idle-timeout tests run alone too: URLSession on Linux hands every task's parts to the
# delegate through one queue, so a flowing stream beside a refused gzip bomb or a 256 MiB transfer
# receives its parts seconds late, and an idle limit of 2 s counts that as idle time.
transfers="UploadIntegrationTests|ProgressIntegrationTests|DownloadIntegrationTests|StreamingIntegrationTests|NginxIntegrationTests|TimeoutIntegrationTests"
progress="ProgressIntegrationTests"
timeouts="TimeoutIntegrationTests"

echo "== An app target's settings: Tests/DefaultIsolation (Swift 6, default isolation MainActor, tools 6.2)"
# The README's first manager, the main-actor view model of "The delegate and async" and the Testing
# article's sample, compiled as new app targets are and run on the main actor; and a forwarding
# method with a misspelled label, which must make the compiler warn.
touch Tests/DefaultIsolation/Sources/MisspelledForwarding/MisspelledForwarding.swift
if ! app_build=$(swift build --package-path Tests/DefaultIsolation --build-tests 2>&1); then
    echo "$app_build" >&2
    exit 1
fi
if ! grep -qF "deprecated default implementation is used to satisfy instance method 'task(_:didFinishWith:)'" \
    <<<"$app_build"; then
    echo "$app_build"
    echo "a misspelled terminal forwarding method compiled without a warning" >&2
    exit 1
fi
run_tests swift test --package-path Tests/DefaultIsolation --skip-build
total=$((total + $(cat "$log.count")))
run_tests swift test --package-path Tests/DefaultIsolation --sanitize=thread --scratch-path Tests/DefaultIsolation/.build-tsan
total=$((total + $(cat "$log.count")))

echo "== Integration tests against the real server"
run_tests swift test --skip-build --filter APIManagerKitIntegrationTests --skip "$transfers"
total=$((total + $(cat "$log.count")))
if skipped_integration; then
    echo "the integration suite was skipped although the server was started" >&2
    exit 1
fi
echo "== Integration tests that move files and streams"
run_tests swift test --skip-build --filter "$transfers" --skip "$progress|$timeouts"
total=$((total + $(cat "$log.count")))
run_tests swift test --skip-build --filter "$progress"
total=$((total + $(cat "$log.count")))
run_tests swift test --skip-build --filter "$timeouts"
total=$((total + $(cat "$log.count")))

echo "== Unit tests under ThreadSanitizer"
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$unit_width \
    run_tests swift test --sanitize=thread --scratch-path .build-tsan --skip APIManagerKitIntegrationTests
total=$((total + $(cat "$log.count")))

echo "== Integration tests under ThreadSanitizer"
run_tests swift test --skip-build --sanitize=thread --scratch-path .build-tsan --filter APIManagerKitIntegrationTests \
    --skip "$transfers"
total=$((total + $(cat "$log.count")))
run_tests swift test --skip-build --sanitize=thread --scratch-path .build-tsan --filter "$transfers" \
    --skip "$progress|$timeouts"
total=$((total + $(cat "$log.count")))
run_tests swift test --skip-build --sanitize=thread --scratch-path .build-tsan --filter "$progress"
total=$((total + $(cat "$log.count")))
run_tests swift test --skip-build --sanitize=thread --scratch-path .build-tsan --filter "$timeouts"
total=$((total + $(cat "$log.count")))

echo "== AsyncHTTPClient transport: its package built, and the same integration suite run on it"
# The adapter package (Transports/AsyncHTTPClient) depends on async-http-client and SwiftNIO; its
# first build takes about 3 minutes on 2 cores. Its test target is the integration suite above,
# shared through a link, with TransportUnderTest naming AsyncHTTPClientTransport.
swift build --package-path Transports/AsyncHTTPClient --build-tests
run_tests swift test --package-path Transports/AsyncHTTPClient --skip-build --skip "$transfers"
total=$((total + $(cat "$log.count")))
if skipped_integration; then
    echo "the integration suite was skipped on AsyncHTTPClientTransport although the server was started" >&2
    exit 1
fi
if grep -q 'the trust tests are SKIPPED' "$log"; then
    echo "the TLS trust tests were skipped although the TLS servers were started" >&2
    exit 1
fi
run_tests swift test --package-path Transports/AsyncHTTPClient --skip-build --filter "$transfers" \
    --skip "$progress|$timeouts"
total=$((total + $(cat "$log.count")))
run_tests swift test --package-path Transports/AsyncHTTPClient --skip-build --filter "$progress"
total=$((total + $(cat "$log.count")))
run_tests swift test --package-path Transports/AsyncHTTPClient --skip-build --filter "$timeouts"
total=$((total + $(cat "$log.count")))
echo "== HAR: the sessions recorded on both transports and the committed recordings, as HAR 1.2 and read back by haralyzer"
har_files=("$APIMANAGERKIT_HAR_DIR/URLSessionTransport.har" "$APIMANAGERKIT_HAR_DIR/AsyncHTTPClientTransport.har"
    "$APIMANAGERKIT_HAR_DIR/playground.har")
while IFS= read -r committed; do har_files+=("$committed"); done < <(git ls-files '*.har')
.build-venv/bin/python Scripts/check-har.py "${har_files[@]}"
# The check must be able to fail: a file without timings, and one that is not JSON.
.build-venv/bin/python - "$APIMANAGERKIT_HAR_DIR" <<'PY'
import json, sys
har = json.load(open(sys.argv[1] + "/URLSessionTransport.har"))
del har["log"]["entries"][0]["timings"]
json.dump(har, open(sys.argv[1] + "/lacking.har", "w"))
open(sys.argv[1] + "/broken.har", "w").write('{"log": {"version": "1.2", "entries": [')
PY
for broken in lacking broken; do
    if .build-venv/bin/python Scripts/check-har.py "$APIMANAGERKIT_HAR_DIR/$broken.har" > /dev/null 2>&1; then
        echo "check-har.py accepted a $broken HAR" >&2
        exit 1
    fi
done

echo "== TLS trust on AsyncHTTPClientTransport under ThreadSanitizer (roots, pins, identities against nginx)"
run_tests swift test --package-path Transports/AsyncHTTPClient --sanitize=thread \
    --scratch-path Transports/AsyncHTTPClient/.build-tsan --filter TrustTests
total=$((total + $(cat "$log.count")))
echo "== Playground against the real server on AsyncHTTPClientTransport (--transport ahc)"
ahc_output=$(swift run --package-path Transports/AsyncHTTPClient --skip-build PlaygroundAHC \
    --base-url "$APIMANAGERKIT_TEST_SERVER" --transport ahc)
echo "$ahc_output"
expect_live_stories "$ahc_output" ahc

echo "== Observability integrations (Integrations/Observability): swift-log, swift-metrics, swift-distributed-tracing"
# A package of its own, so that the library keeps zero dependencies. Its unit tests, and its
# integration tests on URLSessionTransport (they ran on AsyncHTTPClientTransport above, through
# that package's ObservabilityShared link), then all of them under ThreadSanitizer.
swift build --package-path Integrations/Observability --build-tests
run_tests swift test --package-path Integrations/Observability --skip-build
total=$((total + $(cat "$log.count")))
if grep -q 'APIMANAGERKIT_TEST_SERVER is not set: SKIPPED' "$log"; then
    echo "the observability integration tests were skipped although the server was started" >&2
    exit 1
fi
run_tests swift test --package-path Integrations/Observability --sanitize=thread \
    --scratch-path Integrations/Observability/.build-tsan
total=$((total + $(cat "$log.count")))
echo "== Observability sample: spans of three requests to an in-process collector"
sample_output=$(swift run --package-path Integrations/Observability --skip-build ObservabilitySample)
echo "$sample_output"
for expected in \
    "APIManagerKit task kind=internal trace=trace-1 span=span-2 parent=span-1 status=unset" \
    "GET kind=client trace=trace-1 span=span-7 parent=span-4 status=unset apimanager.attempt=int64(2) http.request.method=string(\"GET\") http.request.resend_count=int64(1) http.response.status_code=int64(200)" \
    "error.type=string(\"cancelled\")" \
    "GET /api/prices: [(key: \"In-Memory-Span-Id\", value: \"span-7\"), (key: \"In-Memory-Trace-Id\", value: \"trace-1\")]" \
    "apimanager.task.retries [(\"apimanager.policy\", \"waitUntilDone\")] 1"; do
    if ! grep -qF "$expected" <<<"$sample_output"; then
        echo "the observability sample's output lacks: $expected" >&2
        exit 1
    fi
done
if grep -q "secret-key" <<<"$sample_output"; then
    echo "the observability sample wrote a secret" >&2
    exit 1
fi

echo "== Fuzzing: every target for 30 s from its committed corpus (a crash fails the run)"
bash Scripts/fuzz.sh 30

# With `set -o pipefail` a failing run has stopped the script already; every run passed.
echo "tests: $total passed, 0 failed"
