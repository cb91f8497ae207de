import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The network seam: sends one `URLRequest` and reports what came back. ``URLSessionTransport`` is
/// the default; `MockTransport` (APIManagerKitTesting) scripts answers for tests.
///
/// A transport must call `completion` exactly once unless the request is cancelled (after which it
/// may call it or not; the engine drops any late call). It may call it on any thread, even before
/// ``send(_:completion:)`` returns.
public protocol APITransport: Sendable {
    func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Sends a request whose headers named in `sensitiveHeaders` (credentials: `Authorization`, a
    /// custom auth header, persisted auth headers) must not follow a redirect to another origin.
    /// Defaults to ``send(_:completion:)``, for transports that do not follow redirects themselves.
    func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable
}

extension APITransport {
    public func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, completion: completion)
    }
}
