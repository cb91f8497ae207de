#!/usr/bin/env bash
# The whole test suite, as README.md gives it: `bash Scripts/test.sh`.
# It needs nothing but a Swift 6 toolchain; it installs whatever else it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Formatting: swift format lint (configuration in .swift-format)"
swift format lint --strict -r Sources Tests Playground Benchmarks/Benchmarks Package.swift

echo "== Playground: build, run every story, reject an unknown argument"
swift build --product Playground
swift run --skip-build Playground > /dev/null
if swift run --skip-build Playground --no-such-option > /dev/null 2>&1; then
    echo "Playground accepted an unknown argument" >&2
    exit 1
fi

echo "== Unit tests"
swift test

echo "== Unit tests under ThreadSanitizer"
swift test --sanitize=thread --scratch-path .build-tsan
