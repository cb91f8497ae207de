// swift-tools-version:6.0
// Coverage-guided fuzz targets (libFuzzer) for everything APIManagerKit parses from outside.
// A package of its own, so the library keeps no dependency and no fuzzer flags. Each target is a
// static library defining `LLVMFuzzerTestOneInput`; Scripts/fuzz.sh builds them with
// `-sanitize=fuzzer` and links each with libFuzzer's own `main` (see CONTRIBUTING.md, "Fuzzing").
import PackageDescription

let targets = [
    "FuzzRetryAfter", "FuzzServerMessage", "FuzzKeyPathDecoding", "FuzzCacheFile", "FuzzQueryEncoding",
    "FuzzPathTemplate", "FuzzCredentialStore", "FuzzLinkHeader",
    "FuzzLenientMapping", "FuzzSetCookie", "FuzzMultipart",
    "FuzzServerSentEvents", "FuzzJSONLines", "FuzzContentRange", "FuzzHeaderFields", "FuzzCertificate",
]

let package = Package(
    name: "APIManagerKitFuzz",
    products: targets.map { .library(name: $0, type: .static, targets: [$0]) },
    dependencies: [.package(name: "APIManagerKit", path: "..")],
    targets: targets.map {
        .target(name: $0, dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")])
    },
    swiftLanguageModes: [.v6]
)
