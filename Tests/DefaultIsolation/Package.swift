// swift-tools-version:6.2
// An app's code as new Xcode 26 app targets build it: Swift 6, default isolation `MainActor`
// (SE-0466). The README's first manager, the documented main-actor view model and the Testing
// article's sample, compiled and run by Scripts/test.sh (`swift test --package-path
// Tests/DefaultIsolation`). The library itself keeps its own tools version.
import PackageDescription

let appSettings: [SwiftSetting] = [.defaultIsolation(MainActor.self)]

let package = Package(
    name: "DefaultIsolation",
    platforms: [.macOS(.v12), .iOS(.v15)],
    dependencies: [.package(name: "APIManagerKit", path: "../..")],
    targets: [
        .target(
            name: "ShopApp",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            swiftSettings: appSettings
        ),
        // A manager whose terminal forwarding method is misspelled: Scripts/test.sh builds it and
        // fails unless the compiler warns that the deprecated default is used instead.
        .target(
            name: "MisspelledForwarding",
            dependencies: [.product(name: "APIManagerKit", package: "APIManagerKit")],
            swiftSettings: appSettings
        ),
        .testTarget(
            name: "ShopAppTests",
            dependencies: [
                "ShopApp", .product(name: "APIManagerKit", package: "APIManagerKit"),
                .product(name: "APIManagerKitTesting", package: "APIManagerKit"),
            ],
            swiftSettings: appSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
