import Foundation

extension APIAuthentication {
    /// Credentials for one request, sent in a header (``APIRequest/authorization``).
    ///
    /// The header is treated as a secret: redacted in ``APIRequest/cURLDescription(revealingSecrets:secretNames:)``
    /// and removed when a redirect leaves the request's origin.
    public enum Authorization: Sendable, Hashable {
        /// `Authorization: Bearer <token>`.
        case bearer(String)
        /// `Authorization: Basic <base64(username:password)>` (RFC 7617, UTF-8).
        case basic(username: String, password: String)
        /// Any header and value, for example `.custom(header: "X-API-Key", value: key)`.
        case custom(header: String, value: String)

        /// The header name and value this authorization sends.
        public var header: (name: String, value: String) {
            switch self {
            case .bearer(let token):
                return ("Authorization", "Bearer \(token)")
            case .basic(let username, let password):
                return ("Authorization", "Basic " + Data("\(username):\(password)".utf8).base64EncodedString())
            case .custom(let name, let value):
                return (name, value)
            }
        }
    }
}
