import Foundation

extension APIAuthentication {
    /// A credential an ``APIAuthentication`` applies to requests and renews: an access token, the
    /// refresh token that renews it, and any other string values the server hands out with them.
    public struct Credential: Sendable, Hashable {
        /// What requests carry (by default as `Authorization: Bearer <accessToken>`).
        public var accessToken: String
        /// What a refresh sends to get a new access token; `nil` when there is none.
        public var refreshToken: String?
        /// Other values kept with the tokens (a user identifier, a token type, an expiry date).
        public var values: [String: String]

        /// A credential; `refreshToken` and `values` are empty unless given.
        public init(accessToken: String, refreshToken: String? = nil, values: [String: String] = [:]) {
            self.accessToken = accessToken
            self.refreshToken = refreshToken
            self.values = values
        }

        private static let accessTokenKey = "access_token"
        private static let refreshTokenKey = "refresh_token"

        /// The form it is kept in by an ``APIAuthentication/CredentialStore``: `access_token`, `refresh_token` and
        /// ``values`` in one string table.
        var storedForm: [String: String] {
            var table = values
            table[Self.accessTokenKey] = accessToken
            table[Self.refreshTokenKey] = refreshToken
            return table
        }

        /// Reads the stored form back; `nil` without an access token.
        init?(storedForm table: [String: String]) {
            guard let accessToken = table[Self.accessTokenKey] else { return nil }
            var values = table
            values[Self.accessTokenKey] = nil
            values[Self.refreshTokenKey] = nil
            self.init(accessToken: accessToken, refreshToken: table[Self.refreshTokenKey], values: values)
        }
    }
}
