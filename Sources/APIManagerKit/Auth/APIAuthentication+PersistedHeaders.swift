import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIAuthentication {
    /// Auth headers a server hands out in responses and expects back on every later request (such as
    /// `access-token`, `client` and `uid`, as devise_token_auth sends them).
    ///
    /// Give it to the engine: `APIEngine(persistedHeaders: APIAuthentication.PersistedHeaders())`. The engine then
    /// captures the named headers from every response (any status) into ``store``, per origin, and adds
    /// them to every later request to the same origin (scheme, host, port) unless the request sets them
    /// itself. They are credentials: redacted in cURL descriptions, dropped when a redirect leaves the
    /// origin, and they make a response count as authenticated for the cache.
    public struct PersistedHeaders: Sendable {
        /// The header names captured and sent. `["access-token", "client", "uid"]` unless given.
        public var names: [String]
        /// Where the captured values live. A new ``APIAuthentication/InMemoryCredentialStore`` unless given.
        public var store: any APIAuthentication.CredentialStore

        /// Headers to capture and send back, kept in `store`.
        public init(
            names: [String] = ["access-token", "client", "uid"],
            store: any APIAuthentication.CredentialStore = APIAuthentication.InMemoryCredentialStore()
        ) {
            self.names = names
            self.store = store
        }

        /// The origin key a URL's headers are stored under: `scheme://host:port`.
        public static func origin(of url: URL?) -> String? {
            guard let origin = Origin(url) else { return nil }
            return "\(origin.scheme)://\(origin.host)" + (origin.port.map { ":\($0)" } ?? "")
        }

        /// Adds the stored headers for the request's origin that the request does not set itself.
        func apply(to request: inout URLRequest) {
            guard let origin = Self.origin(of: request.url) else { return }
            for (name, value) in store.headers(forOrigin: origin) where request.value(forHTTPHeaderField: name) == nil {
                request.setValue(value, forHTTPHeaderField: name)
            }
        }

        /// Stores the named headers the response carries, under the origin that sent it.
        func capture(from response: APIRawResponse, requestURL: URL?) {
            guard let origin = Self.origin(of: response.url ?? requestURL) else { return }
            var captured: [String: String] = [:]
            for name in names {
                if let value = response.value(forHeader: name), !value.isEmpty { captured[name] = value }
            }
            if !captured.isEmpty { store.save(captured, forOrigin: origin) }
        }
    }
}
