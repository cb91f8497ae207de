import APIManagerKit
import APIManagerKitAsyncHTTPClient

/// The transport the observability integration tests (the `ObservabilityShared` link) run on here;
/// in Integrations/Observability this file names `URLSessionTransport`.
enum ObservedTransport {
    static let name = "AsyncHTTPClientTransport"
    static func make() -> any APITransport { AsyncHTTPClientTransport() }
    /// The HTTP version it tells the test server's answers came in (the response's head).
    static let protocolVersion: String? = "1.1"
}
