import APIManagerKit
import APIManagerKitAsyncHTTPClient

/// The transport the observability integration tests (the `ObservabilityShared` link) run on here;
/// in Integrations/Observability this file names `URLSessionTransport`.
enum ObservedTransport {
    static let name = "AsyncHTTPClientTransport"
    static func make() -> any APITransport { AsyncHTTPClientTransport() }
}
