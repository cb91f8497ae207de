import Foundation

extension APIEngine {
    /// Which servers a transport trusts over TLS, and the client certificate it shows them: roots of
    /// the app's own, public-key pins, a client identity, for every host or per host. Give it to the
    /// transport an engine sends with; the system's trust is the default.
    ///
    /// ```swift
    /// let ourRoot = try APIEngine.Trust.Certificate(pem: rootPEM)
    /// var trust = APIEngine.Trust()
    /// trust.hosts["api.bank.example"] = APIEngine.Trust.Rule(
    ///     roots: [ourRoot],
    ///     pins: [
    ///         try APIEngine.Trust.Pin("sha256/lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI="),  // the key in use
    ///         try APIEngine.Trust.Pin("sha256/lmHwjeH5lL4bRHUCwCObVDnbsB9mMXq9oyocfCfZ6ac="),  // the next one
    ///     ])
    /// var configuration = APIEngine.Configuration()
    /// configuration.transport = try URLSessionTransport(trust: trust)  // Apple platforms; refused on Linux
    /// ```
    ///
    /// On Linux, give it to `AsyncHTTPClientTransport(trust:)` (the APIManagerKitAsyncHTTPClient
    /// package) instead. See <doc:TrustAndPinning>.
    ///
    /// - A **root** is a certificate a server's chain may end at, besides the system's
    ///   (``Rule/trustsSystemRoots``, `true` unless set: with `false` only the rule's roots are).
    /// - A **pin** is the SHA-256 of a certificate's SubjectPublicKeyInfo, base64, as OkHttp's
    ///   `CertificatePinner` and HPKP write it. When a rule has pins, a server must first pass the
    ///   usual checks (a trusted root, dates, the host name) and then show a certificate whose key
    ///   matches one of them; give several for rotation (the key in use and the next one). Which
    ///   certificates of the chain are compared depends on the transport (see its documentation:
    ///   every one on Apple platforms, the server's own on AsyncHTTPClient). Nothing of the request
    ///   is sent before the server is trusted.
    /// - An **identity** is the certificate and private key shown to a server that asks for one
    ///   (mutual TLS).
    ///
    /// A server that is not trusted fails the attempt with ``APIError/transport(underlying:)``
    /// carrying a ``Failure`` that names the host and the reason; it is not retried.
    ///
    /// Transports: `AsyncHTTPClientTransport` applies everything (through NIOSSL) on every platform;
    /// ``URLSessionTransport`` applies everything on Apple platforms (with `SecTrust`) and, on Linux,
    /// refuses any trust but the system's when it is made (FoundationNetworking gives its delegate
    /// no trust challenge, so it could not be honoured).
    public struct Trust: Sendable, Hashable {
        /// What a transport trusts for one host, or for every host.
        public struct Rule: Sendable, Hashable {
            /// Roots of the app's own a server's chain may end at. None unless given.
            public var roots: [Certificate]
            /// Whether the system's roots are trusted too. `true` unless set; with `false` only
            /// ``roots`` are.
            public var trustsSystemRoots: Bool
            /// The public keys a trusted server must show one of. None unless given: any key.
            public var pins: [Pin]
            /// The client certificate and key shown to a server that asks for one. None unless given.
            public var identity: Identity?

            /// A rule; each part has the default its property states.
            public init(
                roots: [Certificate] = [], trustsSystemRoots: Bool = true, pins: [Pin] = [], identity: Identity? = nil
            ) {
                self.roots = roots
                self.trustsSystemRoots = trustsSystemRoots
                self.pins = pins
                self.identity = identity
            }

            /// Whether the rule is the system's trust: no roots of its own, no pins, no identity.
            public var isSystemTrust: Bool { roots.isEmpty && trustsSystemRoots && pins.isEmpty && identity == nil }
        }

        /// The rule for every host without one in ``hosts``. The system's trust unless set.
        public var rule: Rule
        /// Rules by host: a name (`api.example.com`), `*.example.com` for one more label
        /// (`a.example.com`, not `example.com` nor `a.b.example.com`), or `**.example.com` for any
        /// number (`example.com` included), as OkHttp's `CertificatePinner` writes them. Compared
        /// without regard to case. The most specific one applies: a name, then `*.`, then the
        /// longest `**.`. None unless set.
        public var hosts: [String: Rule]

        /// The system's trust for every host: what a transport does when given no trust.
        public static let system = Trust()

        /// A trust whose ``rule`` applies to every host.
        public init(_ rule: Rule = Rule(), hosts: [String: Rule] = [:]) {
            self.rule = rule
            self.hosts = hosts
        }

        /// Whether every rule is the system's trust.
        public var isSystemTrust: Bool { rule.isSystemTrust && hosts.values.allSatisfy(\.isSystemTrust) }

        /// The rule that applies to `host` (see ``hosts``).
        public func rule(forHost host: String) -> Rule {
            guard let pattern = pattern(forHost: host) else { return rule }
            return hosts[pattern] ?? rule
        }

        /// The key of ``hosts`` whose rule applies to `host`, or `nil` for ``rule``.
        public func pattern(forHost host: String) -> String? {
            let host = Self.normalized(host)
            var best: (pattern: String, rank: Int)?
            for pattern in hosts.keys {
                let rank = Self.rank(of: Self.normalized(pattern), for: host)
                if rank > 0, rank > best?.rank ?? 0 { best = (pattern, rank) }
            }
            return best?.pattern
        }

        /// Checks the pins of `host`'s rule against the certificates a server showed (DER, its own
        /// first): `nil` when the rule has no pins or one of the certificates' keys matches a pin,
        /// the ``Failure`` to fail the attempt with otherwise. Transports call it once the server
        /// passed the system's or the roots' checks; call it from a transport of your own the same
        /// way.
        public func checkPins(host: String, certificates: [Data]) -> Failure? {
            let pins = rule(forHost: host).pins
            guard !pins.isEmpty else { return nil }
            var shown: [Pin] = []
            for der in certificates {
                guard let pin = Certificate.publicKeyPin(ofDER: [UInt8](der)) else { continue }
                if pins.contains(pin) { return nil }
                shown.append(pin)
            }
            let detail =
                "it showed \(shown.isEmpty ? "no readable key" : shown.map(\.description).joined(separator: ", ")); "
                + "pinned: \(pins.map(\.description).joined(separator: ", "))"
            return Failure(host: host, reason: .pinMismatch, detail: detail)
        }

        /// Throws ``Failure/Reason/invalidConfiguration`` for a host pattern that is none of the
        /// forms ``hosts`` names; transports call it when they are made.
        public func validate() throws {
            for pattern in hosts.keys where !Self.isValid(pattern: Self.normalized(pattern)) {
                throw Failure(
                    host: pattern, reason: .invalidConfiguration,
                    detail: "a host pattern is a name, \"*.\" or \"**.\" followed by a name")
            }
        }

        static func normalized(_ host: String) -> String {
            var host = host.lowercased()
            if host.hasSuffix(".") { host.removeLast() }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            return host
        }

        static func isValid(pattern: String) -> Bool {
            var name = Substring(pattern)
            if name.hasPrefix("**.") {
                name = name.dropFirst(3)
            } else if name.hasPrefix("*.") {
                name = name.dropFirst(2)
            }
            return !name.isEmpty && !name.contains("*")
                && !name.split(separator: ".", omittingEmptySubsequences: false)
                    .contains(where: \.isEmpty)
        }

        /// 0 when `pattern` does not cover `host`; otherwise higher for a more specific pattern.
        static func rank(of pattern: String, for host: String) -> Int {
            guard isValid(pattern: pattern) else { return 0 }
            if pattern.hasPrefix("**.") {
                let suffix = pattern.dropFirst(3)
                guard host == suffix || host.hasSuffix("." + suffix) else { return 0 }
                return 1 + suffix.count
            }
            if pattern.hasPrefix("*.") {
                let suffix = pattern.dropFirst(2)
                guard host.hasSuffix("." + suffix) else { return 0 }
                let label = host.dropLast(suffix.count + 1)
                return label.isEmpty || label.contains(".") ? 0 : 1_000_000
            }
            return pattern == host ? 2_000_000 : 0
        }
    }
}
