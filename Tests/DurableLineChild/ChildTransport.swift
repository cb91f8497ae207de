import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport the child sends with: URLSession's here; `Transports/AsyncHTTPClient` builds the
/// same child (`DurableLineChildAHC`) with its own version of this file.
enum ChildTransport {
    static func make() -> any APITransport { URLSessionTransport() }
}
