import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIAuthentication {
    /// How an API authenticates: how a credential goes on a request, how the server says it refuses
    /// it, and how it is renewed. An ``APIAuthentication`` calls it and guarantees the rest: one
    /// refresh at a time, requests waiting for it, replays and failures (see there).
    ///
    /// Only ``refresh(_:)`` has no default: by default the credential is sent as
    /// `Authorization: Bearer <accessToken>` and a `401` means it was refused.
    public protocol Authenticator: Sendable {
        /// Puts the credential on a request. Defaults to `Authorization: Bearer <accessToken>`.
        /// Called before every attempt, never while a lock is held.
        func apply(_ credential: APIAuthentication.Credential, to request: inout URLRequest)

        /// Whether the response says the credential the request carried was refused. Defaults to a
        /// `401` status.
        func isRefused(_ response: APIRawResponse, to request: URLRequest) -> Bool

        /// A new credential to replace `credential`, which the server refused; throwing fails every
        /// request waiting for it with ``APIError/authenticationFailed(underlying:)``.
        ///
        /// Called at most once at a time per ``APIAuthentication``, however many requests are
        /// refused together, in a Swift task of its own, never while a lock is held. It may send
        /// requests itself, through another manager or a plain `URLSession` (not through a manager
        /// whose engine uses this authentication: those requests would wait for this refresh).
        func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential

        /// Whether `request` was sent with `credential`. Defaults to comparing every header
        /// ``apply(_:to:)`` sets with the request's own.
        func request(_ request: URLRequest, wasSentWith credential: APIAuthentication.Credential) -> Bool
    }
}

extension APIAuthentication.Authenticator {
    public func apply(_ credential: APIAuthentication.Credential, to request: inout URLRequest) {
        // One change of the header table: on Linux `setValue` costs about twice as much, and
        // `caseInsensitiveCompare` goes through CFString with a locale.
        var fields = request.allHTTPHeaderFields ?? [:]
        for name in fields.keys where name.utf8.count == 13 && name.lowercased() == "authorization" {
            fields[name] = nil
        }
        fields["Authorization"] = "Bearer \(credential.accessToken)"
        request.allHTTPHeaderFields = fields
    }

    public func isRefused(_ response: APIRawResponse, to request: URLRequest) -> Bool {
        response.statusCode == 401
    }

    public func request(_ request: URLRequest, wasSentWith credential: APIAuthentication.Credential) -> Bool {
        var blank = URLRequest(url: request.url ?? URL(fileURLWithPath: "/"))
        blank.allHTTPHeaderFields = [:]
        apply(credential, to: &blank)
        let expected = blank.allHTTPHeaderFields ?? [:]
        return !expected.isEmpty && expected.allSatisfy { request.value(forHTTPHeaderField: $0.key) == $0.value }
    }
}
