// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "APIManagerKit",
    platforms: [.macOS(.v12), .iOS(.v15), .tvOS(.v15), .watchOS(.v8)],
    products: [
        .library(name: "APIManagerKit", targets: ["APIManagerKit"]),
        .library(name: "APIManagerKitTesting", targets: ["APIManagerKitTesting"]),
        .executable(name: "Playground", targets: ["Playground"]),
    ],
    targets: [
        // The privacy manifest Xcode folds into an app's report (Scripts/check-privacy-manifest.py
        // keeps it true to the code).
        .target(name: "APIManagerKit", resources: [.copy("PrivacyInfo.xcprivacy")]),
        .target(name: "APIManagerKitTesting", dependencies: ["APIManagerKit"]),
        .executableTarget(
            name: "Playground",
            dependencies: ["APIManagerKit", "APIManagerKitTesting"],
            path: "Playground"
        ),
        // The process the durable line's integration test kills at each step and starts again.
        .executableTarget(
            name: "DurableLineChild",
            dependencies: ["APIManagerKit"],
            path: "Tests/DurableLineChild"
        ),
        .testTarget(
            name: "APIManagerKitTests",
            dependencies: ["APIManagerKit", "APIManagerKitTesting"],
            // HAR files recorded against the integration server, read by the tests from their path.
            exclude: ["Recordings"]
        ),
        // Runs against the real server Scripts/test.sh starts; skipped (and says so) without it.
        .testTarget(
            name: "APIManagerKitIntegrationTests",
            dependencies: ["APIManagerKit", "APIManagerKitTesting"],
            exclude: ["README.md"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
