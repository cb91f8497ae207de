#!/usr/bin/env bash
# Regenerates Types.swift and Client.swift from openapi.yaml with swift-openapi-generator 1.14.3
# (built once in a scratch package; the generated files are committed, so builds need no plugin).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scratch="${TMPDIR:-/tmp}/openapi-generator-cli"
mkdir -p "$scratch/Sources/Nothing"
cat > "$scratch/Package.swift" <<'SWIFT'
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "GeneratorCLI",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "1.14.3")],
    targets: [.target(name: "Nothing")]
)
SWIFT
echo "" > "$scratch/Sources/Nothing/Nothing.swift"
swift build -c release --package-path "$scratch" --product swift-openapi-generator >&2
"$(swift build -c release --package-path "$scratch" --show-bin-path)/swift-openapi-generator" generate \
    --config "$here/openapi-generator-config.yaml" --output-directory "$here" "$here/openapi.yaml"
