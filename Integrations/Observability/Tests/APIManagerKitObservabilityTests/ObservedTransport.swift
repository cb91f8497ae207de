import APIManagerKit

/// The transport the observability integration tests (`Integration/`) run on here; the folder is
/// shared with `Transports/AsyncHTTPClient`, whose tests bring their own version of this file.
enum ObservedTransport {
    static let name = "URLSessionTransport"
    static func make() -> any APITransport { URLSessionTransport() }
    /// The HTTP version it tells the test server's answers came in: FoundationNetworking on Linux
    /// tells none; Apple's metrics name it.
    #if canImport(FoundationNetworking)
    static let protocolVersion: String? = nil
    #else
    static let protocolVersion: String? = "1.1"
    #endif
}
