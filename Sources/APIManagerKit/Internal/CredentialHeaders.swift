import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one rule for which request headers carry credentials. It decides, everywhere alike, what is
/// redacted in cURL descriptions and events, what is dropped on a redirect to another origin, and
/// which requests count as authenticated for the response cache.
///
/// A header is a credential when it is `Authorization`, `Proxy-Authorization` or `Cookie`, when the
/// engine marks it (a custom auth header, persisted auth headers), or when its name contains
/// `token`, `secret`, `password`, `api-key`, `apikey`, `auth` or `session` (`X-Auth-Token`,
/// `X-API-Key`, `X-Session-ID`), whatever the case.
enum CredentialHeaders {
    static let standard: Set<String> = ["authorization", "proxy-authorization", "cookie"]
    static let nameFragments = ["token", "secret", "password", "api-key", "apikey", "auth", "session"]

    /// - Parameter marked: names the engine marks as credentials, in any case.
    static func isCredential(_ name: String, marked: Set<String> = []) -> Bool {
        let lowered = name.lowercased()
        return isCredential(lowercased: lowered, marked: marked)
            || marked.contains { $0.lowercased() == lowered }
    }

    /// The credential headers a request carries, sorted by lowercased name.
    static func credentials(in request: URLRequest, marked: Set<String> = []) -> [(name: String, value: String)] {
        guard let fields = request.allHTTPHeaderFields, !fields.isEmpty else { return [] }
        let markedLowercased = Set(marked.map { $0.lowercased() })
        var found: [(name: String, value: String)] = []
        for (name, value) in fields {
            let lowered = name.lowercased()
            if isCredential(lowercased: lowered, marked: markedLowercased) { found.append((lowered, value)) }
        }
        return found.sorted { $0.name < $1.name }
    }

    private static func isCredential(lowercased name: String, marked: Set<String>) -> Bool {
        standard.contains(name) || marked.contains(name) || nameFragments.contains { name.contains($0) }
    }
}
