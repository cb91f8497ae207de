// swift-tools-version:6.0
// APIManagerKit's transport on AsyncHTTPClient, as a package of its own so that the library keeps
// zero dependencies. It depends on APIManagerKit by relative path and can move to a repository of
// its own by replacing that path with a URL.
import PackageDescription

let package = Package(
    name: "APIManagerKitAsyncHTTPClient",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "APIManagerKitAsyncHTTPClient", targets: ["APIManagerKitAsyncHTTPClient"]),
        .executable(name: "PlaygroundAHC", targets: ["PlaygroundAHC"]),
    ],
    dependencies: [
        .package(name: "APIManagerKit", path: "../.."),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "APIManagerKitAsyncHTTPClient",
            dependencies: [
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ]
        ),
        // APIManagerKit's Playground (linked as `Shared`) with `--transport ahc`:
        // swift run --package-path Transports/AsyncHTTPClient PlaygroundAHC --base-url URL --transport ahc
        .executableTarget(
            name: "PlaygroundAHC",
            dependencies: [
                "APIManagerKitAsyncHTTPClient", .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "APIManagerKitTesting", package: "APIManagerKit"),
            ],
            path: "Playground",
            exclude: ["Shared/LiveTransports.swift"]
        ),
        // Benchmarks/Sources/HTTPBenchmark (linked as `Shared`) with the `ahc` and `managerAHC`
        // clients added; Scripts/benchmark-http.sh --instructions runs it.
        .executableTarget(
            name: "HTTPBenchmarkAHC",
            dependencies: [
                "APIManagerKitAsyncHTTPClient", .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/HTTPBenchmarkAHC",
            exclude: ["Shared/ExtraClients.swift"]
        ),
        // APIManagerKit's integration suite (linked as `Shared`), run on this transport against the
        // server Scripts/test.sh starts; skipped without it.
        .testTarget(
            name: "APIManagerKitAsyncHTTPClientTests",
            dependencies: [
                "APIManagerKitAsyncHTTPClient", .product(name: "APIManagerKit", package: "APIManagerKit"),
            ],
            exclude: ["Shared/TransportUnderTest.swift", "Shared/README.md"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
