import APIManagerKit
import APIManagerKitAsyncHTTPClient

/// The transport this copy of the integration suite runs on: the suite's files are shared (the
/// `Shared` link) with the main package, where this file names `URLSessionTransport`.
enum TransportUnderTest {
    typealias Transport = AsyncHTTPClientTransport
    static let name = "AsyncHTTPClientTransport"

    static func make() -> Transport { AsyncHTTPClientTransport() }
}
