import APIManagerKit
import APIManagerKitAsyncHTTPClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transports `--transport` can name for `--base-url` in this build of the Playground:
/// URLSession's, and AsyncHTTPClient's (`ahc`).
enum LiveTransports {
    static let names = ["urlsession", "ahc"]

    static func make(_ name: String) -> (any APITransport)? {
        switch name {
        case "urlsession": return URLSessionTransport()
        case "ahc": return AsyncHTTPClientTransport()
        default: return nil
        }
    }
}
