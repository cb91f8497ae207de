import Foundation

extension APIEngine.Trust {
    /// An X.509 certificate, as DER: a root of the app's own, or part of a client identity.
    public struct Certificate: Sendable, Hashable, CustomStringConvertible {
        /// The certificate's DER bytes.
        public let der: Data
        /// The pin of its public key: the SHA-256 of its SubjectPublicKeyInfo.
        public let publicKeyPin: Pin

        /// The certificate in `der`; throws ``Failure/Reason/invalidConfiguration`` when the bytes are
        /// not one.
        public init(der: Data) throws {
            guard let pin = Self.publicKeyPin(ofDER: [UInt8](der)) else {
                throw APIEngine.Trust.Failure(
                    host: "", reason: .invalidConfiguration,
                    detail: "the \(der.count) bytes given are not a DER certificate")
            }
            self.der = der
            self.publicKeyPin = pin
        }

        /// The one certificate of a PEM text (`-----BEGIN CERTIFICATE-----` …); throws
        /// ``Failure/Reason/invalidConfiguration`` unless it holds exactly one.
        public init(pem: String) throws {
            let all = try Self.all(pem: pem)
            guard all.count == 1, let only = all.first else {
                throw APIEngine.Trust.Failure(
                    host: "", reason: .invalidConfiguration,
                    detail: "the PEM text holds \(all.count) certificates, not one (read them with `all(pem:)`)")
            }
            self = only
        }

        /// Every certificate of a PEM text, in order (a chain, a bundle of roots); throws
        /// ``Failure/Reason/invalidConfiguration`` when it holds none or one is damaged.
        public static func all(pem: String) throws -> [Certificate] {
            let begin = "-----BEGIN CERTIFICATE-----"
            let end = "-----END CERTIFICATE-----"
            var certificates: [Certificate] = []
            var rest = Substring(pem)
            while let start = rest.range(of: begin) {
                guard let stop = rest.range(of: end, range: start.upperBound..<rest.endIndex),
                    let der = Data(
                        base64Encoded: String(rest[start.upperBound..<stop.lowerBound]),
                        options: .ignoreUnknownCharacters)
                else {
                    throw APIEngine.Trust.Failure(
                        host: "", reason: .invalidConfiguration,
                        detail: "certificate \(certificates.count + 1) of the PEM text is not base64 between its lines")
                }
                certificates.append(try Certificate(der: der))
                rest = rest[stop.upperBound...]
            }
            guard !certificates.isEmpty else {
                throw APIEngine.Trust.Failure(
                    host: "", reason: .invalidConfiguration, detail: "the PEM text holds no \(begin) block")
            }
            return certificates
        }

        /// `Certificate(sha256/…)`: its key's pin.
        public var description: String { "Certificate(\(publicKeyPin))" }

        static func publicKeyPin(ofDER bytes: [UInt8]) -> Pin? {
            guard let key = DER.subjectPublicKeyInfo(ofCertificate: bytes) else { return nil }
            var hash = SHA256()
            hash.update(key)
            return Pin(sha256: Data(hash.finalize()))
        }
    }

    /// A public-key pin: the SHA-256 of a SubjectPublicKeyInfo, written `sha256/` and its base64
    /// (OkHttp's form). Make one from a server's certificate with
    /// `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der |
    /// openssl dgst -sha256 -binary | base64`, or read ``Certificate/publicKeyPin``.
    public struct Pin: Sendable, Hashable, CustomStringConvertible {
        /// The 32 bytes of the hash.
        public let sha256: Data

        /// The pin written `sha256/BASE64` (the prefix may be left out); throws
        /// ``Failure/Reason/invalidConfiguration`` unless the base64 is of 32 bytes.
        public init(_ text: String) throws {
            var base64 = Substring(text.trimmingCharacters(in: .whitespacesAndNewlines))
            if base64.hasPrefix("sha256/") { base64 = base64.dropFirst(7) }
            guard let hash = Data(base64Encoded: String(base64)), hash.count == 32 else {
                throw APIEngine.Trust.Failure(
                    host: "", reason: .invalidConfiguration,
                    detail: "\"\(text)\" is not a pin: \"sha256/\" and the base64 of 32 bytes")
            }
            self.sha256 = hash
        }

        init(sha256: Data) { self.sha256 = sha256 }

        /// `sha256/` and the hash in base64.
        public var description: String { "sha256/" + sha256.base64EncodedString() }
    }

    /// The certificate and private key a client shows a server that asks for one (mutual TLS).
    public struct Identity: Sendable, Hashable, CustomStringConvertible {
        enum Storage: Hashable {
            case pkcs12(Data, password: String)
            case pem(chain: [Certificate], privateKey: String)
        }

        let storage: Storage

        /// An identity in a PKCS #12 file (`.p12`, `.pfx`): its certificate, chain and key. Every
        /// transport reads this form.
        public static func pkcs12(_ data: Data, password: String) -> Identity {
            Identity(storage: .pkcs12(data, password: password))
        }

        /// An identity as a certificate chain (the client's own first) and an unencrypted private
        /// key in PEM. `AsyncHTTPClientTransport` reads this form; ``URLSessionTransport`` on Apple
        /// platforms refuses it when made (Security imports keys from PKCS #12 only): give it a
        /// ``pkcs12(_:password:)``.
        public static func pem(certificateChain: [Certificate], privateKey: String) -> Identity {
            Identity(storage: .pem(chain: certificateChain, privateKey: privateKey))
        }

        /// The PKCS #12 bytes and password, for a transport of your own; `nil` for the PEM form.
        public var pkcs12: (data: Data, password: String)? {
            guard case .pkcs12(let data, let password) = storage else { return nil }
            return (data, password)
        }

        /// The PEM form's chain and key, for a transport of your own; `nil` for PKCS #12.
        public var pem: (certificateChain: [Certificate], privateKey: String)? {
            guard case .pem(let chain, let key) = storage else { return nil }
            return (chain, key)
        }

        /// Which form it is and its size; never the key or the password.
        public var description: String {
            switch storage {
            case .pkcs12(let data, _): return "Identity(PKCS #12, \(data.count) bytes)"
            case .pem(let chain, _): return "Identity(PEM, \(chain.count) certificate(s))"
            }
        }
    }
}
