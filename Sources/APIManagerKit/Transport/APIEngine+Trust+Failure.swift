import Foundation

extension APIEngine.Trust {
    /// Why a server was not trusted, or why a trust could not be applied: the error a transport
    /// fails an attempt with (inside ``APIError/transport(underlying:)``), or throws when it is made.
    ///
    /// ```swift
    /// if case .transport(let failure as APIEngine.Trust.Failure) = error, failure.reason == .pinMismatch {
    ///     showSecurityWarning(for: failure.host)
    /// }
    /// ```
    public struct Failure: LocalizedError, Sendable, Hashable, CustomStringConvertible {
        /// The host the failure is about (empty for a certificate or pin given without one).
        public let host: String
        /// Why.
        public let reason: Reason
        /// What the transport knows beyond the reason (the keys a server showed, the TLS library's
        /// words), or `nil`.
        public let detail: String?

        /// A failure about `host`.
        public init(host: String, reason: Reason, detail: String? = nil) {
            self.host = host
            self.reason = reason
            self.detail = detail
        }

        /// The ``description``, which ``APIError``'s own description quotes.
        public var errorDescription: String? { description }

        /// The same failure about another host (a transport that learns the request's host late).
        public func about(host: String) -> Failure { Failure(host: host, reason: reason, detail: detail) }

        /// "TLS: api.example.com is not trusted: …", the reason and the detail.
        public var description: String {
            let subject = host.isEmpty ? "TLS trust" : "TLS: \(host)"
            return "\(subject): \(reason)" + (detail.map { " (\($0))" } ?? "") + "."
        }

        /// Why a server was not trusted. A minor release may add reasons; compare with `==`.
        public struct Reason: Sendable, Hashable, CustomStringConvertible {
            enum Code: Hashable {
                case untrustedRoot, expired, wrongHost, pinMismatch, clientCertificateRefused, handshakeFailed
                case unsupportedByTransport, invalidConfiguration
            }

            let code: Code

            /// The server's chain does not end at a trusted root (the system's, or the rule's own).
            public static let untrustedRoot = Reason(code: .untrustedRoot)
            /// The server's certificate has expired or is not yet valid.
            public static let expired = Reason(code: .expired)
            /// The server's certificate is not for the host asked for.
            public static let wrongHost = Reason(code: .wrongHost)
            /// The server is trusted, but none of its keys matches a pin of the host's rule.
            public static let pinMismatch = Reason(code: .pinMismatch)
            /// The server asked for a client certificate and refused the one shown, or that none was.
            public static let clientCertificateRefused = Reason(code: .clientCertificateRefused)
            /// The TLS handshake failed for another reason (the detail gives the TLS library's words).
            public static let handshakeFailed = Reason(code: .handshakeFailed)
            /// The transport cannot apply this trust (Linux's URLSession has no trust challenge).
            public static let unsupportedByTransport = Reason(code: .unsupportedByTransport)
            /// A certificate, pin, identity or host pattern given is not valid.
            public static let invalidConfiguration = Reason(code: .invalidConfiguration)

            /// The reason in words.
            public var description: String {
                switch code {
                case .untrustedRoot: return "its certificate chain does not end at a trusted root"
                case .expired: return "its certificate has expired or is not yet valid"
                case .wrongHost: return "its certificate is for another host"
                case .pinMismatch: return "none of its public keys matches a pin"
                case .clientCertificateRefused: return "it refused the client certificate, or that none was shown"
                case .handshakeFailed: return "the TLS handshake failed"
                case .unsupportedByTransport: return "this transport cannot apply the trust asked for"
                case .invalidConfiguration: return "the trust given is not valid"
                }
            }
        }
    }
}
