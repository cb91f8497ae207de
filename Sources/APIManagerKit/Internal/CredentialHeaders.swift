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
        if standard.contains(lowered) { return true }
        if marked.contains(where: { $0.lowercased() == lowered }) { return true }
        return nameFragments.contains { lowered.contains($0) }
    }

    /// The credential headers a request carries, sorted by lowercased name.
    static func credentials(in request: URLRequest, marked: Set<String> = []) -> [(name: String, value: String)] {
        guard let fields = request.allHTTPHeaderFields else { return [] }
        return fields.filter { isCredential($0.key, marked: marked) }
            .map { (name: $0.key.lowercased(), value: $0.value) }
            .sorted { $0.name < $1.name }
    }
}
