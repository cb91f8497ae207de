// swift-tools-version:6.0
// APIManagerKit observed in the ecosystem's own terms: swift-log, swift-metrics and
// swift-distributed-tracing, with OpenTelemetry's HTTP client conventions. A package of its own, so
// that the library keeps zero dependencies; it depends on APIManagerKit by relative path.
import PackageDescription

let package = Package(
    name: "APIManagerKitObservability",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "APIManagerKitObservability", targets: ["APIManagerKitObservability"]),
        .executable(name: "ObservabilitySample", targets: ["ObservabilitySample"]),
        .executable(name: "ObservabilityCost", targets: ["ObservabilityCost"]),
    ],
    dependencies: [
        .package(name: "APIManagerKit", path: "../.."),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
    ],
    targets: [
        .target(
            name: "APIManagerKitObservability",
            dependencies: [
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Spans of a few requests through a simulated server, exported to standard output by an
        // in-process collector: swift run --package-path Integrations/Observability ObservabilitySample
        .executableTarget(
            name: "ObservabilitySample",
            dependencies: [
                "APIManagerKitObservability",
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "APIManagerKitTesting", package: "APIManagerKit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        // What observing costs per task: Benchmarks/README.md, "Observing".
        .executableTarget(
            name: "ObservabilityCost",
            dependencies: [
                "APIManagerKitObservability",
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "APIManagerKitObservabilityTests",
            dependencies: [
                "APIManagerKitObservability",
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "APIManagerKitTesting", package: "APIManagerKit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
