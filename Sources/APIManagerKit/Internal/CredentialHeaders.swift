import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request headers that carry credentials, by the one rule of ``APISecrets``: what is redacted
/// in cURL descriptions and events, what is dropped on a redirect (or a followed link) to another
/// origin, and which requests count as authenticated for the response cache.
enum CredentialHeaders {
    /// - Parameter marked: names the engine marks as credentials, in any case.
    static func isCredential(_ name: String, marked: Set<String> = []) -> Bool {
        APISecrets.isSecret(name, additionalNames: marked)
    }

    /// The credential headers a request carries, sorted by lowercased name.
    static func credentials(in request: URLRequest, marked: Set<String> = []) -> [(name: String, value: String)] {
        guard let fields = request.allHTTPHeaderFields, !fields.isEmpty else { return [] }
        var found: [(name: String, value: String)] = []
        for (name, value) in fields where APISecrets.isSecret(name, additionalNames: marked) {
            found.append((name.lowercased(), value))
        }
        return found.sorted { $0.name < $1.name }
    }

    /// Removes every credential header: what a request keeps when it leaves its origin (a redirect,
    /// a followed link).
    static func remove(from request: inout URLRequest, marked: Set<String> = []) {
        for name in (request.allHTTPHeaderFields ?? [:]).keys where APISecrets.isSecret(name, additionalNames: marked) {
            request.setValue(nil, forHTTPHeaderField: name)
        }
    }

    /// Removes every credential header from a request value, as ``remove(from:marked:)-(URLRequest,_)``.
    static func remove(from request: inout APIHTTPRequest, marked: Set<String> = []) {
        request.headerFields.removeAll { APISecrets.isSecret($0.name, additionalNames: marked) }
    }
}
