import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport this copy of the integration suite runs on. The suite's other files are shared
/// with `Transports/AsyncHTTPClient`, whose test target brings its own version of this file.
enum TransportUnderTest {
    typealias Transport = URLSessionTransport
    static let name = "URLSessionTransport"

    static func make() -> Transport { URLSessionTransport() }
}
