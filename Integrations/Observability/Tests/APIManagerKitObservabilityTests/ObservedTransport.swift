import APIManagerKit

/// The transport the observability integration tests (`Integration/`) run on here; the folder is
/// shared with `Transports/AsyncHTTPClient`, whose tests bring their own version of this file.
enum ObservedTransport {
    static let name = "URLSessionTransport"
    static func make() -> any APITransport { URLSessionTransport() }
}
