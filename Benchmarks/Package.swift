// swift-tools-version:6.1
// The benchmarks live in their own package so that APIManagerKit itself keeps zero dependencies.
// Run them with: cd Benchmarks && swift package --allow-writing-to-package-directory benchmark
// The HTTP comparison against nginx: bash Scripts/benchmark-http.sh (from the repository root).
import PackageDescription

let package = Package(
    name: "APIManagerKitBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "APIManagerKit", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "APIManagerBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "APIManagerKit", package: "APIManagerKit"),
            ],
            path: "Benchmarks/APIManagerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // Manager vs raw URLSession against nginx on loopback: run by Scripts/benchmark-http.sh.
        .executableTarget(
            name: "HTTPBenchmark",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            path: "Sources/HTTPBenchmark"
        ),
        // Memory kept by finished tasks, with and without deadlines.
        .executableTarget(
            name: "TaskMemory",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            path: "Sources/TaskMemory"
        ),
        // send(_:)'s cost to the sender and parallel response builds, work queue against inline.
        .executableTarget(
            name: "WorkQueue",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            path: "Sources/WorkQueue"
        ),
        // What a durable line costs: a task written and removed, and a replay of 10,000 (Benchmarks/README.md).
        .executableTarget(
            name: "DurableCost",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            path: "Sources/DurableCost"
        ),
        // A recorded session of 10,000 exchanges replayed (Benchmarks/README.md).
        .executableTarget(
            name: "ReplayCost",
            dependencies: [
                .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "APIManagerKitTesting", package: "APIManagerKit"),
            ],
            path: "Sources/ReplayCost"
        ),
        // Instructions per task of the scheduler with and without interceptors, an authentication
        // and default headers (count with valgrind --tool=callgrind; see Benchmarks/README.md).
        .executableTarget(
            name: "SendCost",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            path: "Sources/SendCost"
        ),
    ]
)
