import APIManagerKit
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

extension AsyncHTTPClientTransport {
    /// A transport that trusts servers as `trust` says (``APIManagerKit/APIEngine/Trust``), through
    /// NIOSSL, with clients of its own (on the shared event loop group; shut them down with
    /// ``shutdown()``). `configuration` is used as ``init(configuration:maxRedirects:)`` says, its
    /// TLS configuration (or NIOSSL's client defaults) completed by each rule:
    /// - **roots**: added to the trust roots, or in place of the system's when the rule does not
    ///   trust them;
    /// - **identity**: the client certificate chain and private key (PKCS #12 or PEM);
    /// - **pins**: checked once per connection, after NIOSSL has verified the chain, the dates and
    ///   the host name, and before the connection carries a request (nothing of a request is sent
    ///   to a server that fails them). NIOSSL gives AsyncHTTPClient's connections only the server's
    ///   own certificate, so **a pin is compared with the key of the server's certificate**, not
    ///   with its intermediates' or root's: to pin a certificate authority, give it as the rule's
    ///   root with `trustsSystemRoots` off.
    ///
    /// Each host rule gets a client of its own (its TLS configuration and its connections apart).
    /// A server that is not trusted fails the attempt with ``APIManagerKit/APIError/transport(underlying:)``
    /// carrying an ``APIManagerKit/APIEngine/Trust/Failure`` naming the request's host and the
    /// reason (an unknown root, an expired certificate, another host's certificate, a pin that does
    /// not match, a client certificate refused). Plain `http` requests are sent as before: pins and
    /// roots are about TLS.
    ///
    /// Throws ``APIManagerKit/APIEngine/Trust/Failure`` with
    /// ``APIManagerKit/APIEngine/Trust/Failure/Reason/invalidConfiguration`` for a host pattern,
    /// root or identity NIOSSL cannot read (a wrong PKCS #12 password among them).
    public convenience init(
        configuration: HTTPClient.Configuration = HTTPClient.Configuration(), trust: APIEngine.Trust,
        maxRedirects: Int = 20
    ) throws {
        try trust.validate()
        let own = Self.own(configuration)
        var made: [String: (HTTPClient, TLSConfiguration?)] = [:]
        do {
            for (pattern, rule) in [("", trust.rule)] + trust.hosts.map({ ($0.key, $0.value) }) {
                let configuration = try Self.configuration(own, rule, host: pattern)
                made[pattern] = (
                    HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration),
                    configuration.tlsConfiguration
                )
            }
        } catch {
            for (client, _) in made.values { client.shutdown(queue: .global()) { _ in } }
            throw error
        }
        guard let main = made.removeValue(forKey: "") else {
            preconditionFailure("the rule of every host is made first")
        }
        self.init(client: main, hostClients: made, trust: trust, maxRedirects: maxRedirects)
    }

    /// `configuration` with the rule's roots, identity and pin check.
    static func configuration(
        _ configuration: HTTPClient.Configuration, _ rule: APIEngine.Trust.Rule, host: String
    ) throws -> HTTPClient.Configuration {
        var configuration = configuration
        guard !rule.isSystemTrust else { return configuration }
        var tls = configuration.tlsConfiguration ?? TLSConfiguration.makeClientConfiguration()
        do {
            if !rule.roots.isEmpty {
                let roots = try rule.roots.map { try NIOSSLCertificate(bytes: [UInt8]($0.der), format: .der) }
                if rule.trustsSystemRoots {
                    tls.additionalTrustRoots.append(.certificates(roots))
                } else {
                    tls.trustRoots = .certificates(roots)
                }
            }
            if let identity = rule.identity {
                if let (data, password) = identity.pkcs12 {
                    let bundle = try NIOSSLPKCS12Bundle(buffer: [UInt8](data), passphrase: Array(password.utf8))
                    tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                    tls.privateKey = .privateKey(bundle.privateKey)
                } else if let (chain, key) = identity.pem {
                    tls.certificateChain = try chain.map {
                        .certificate(try NIOSSLCertificate(bytes: [UInt8]($0.der), format: .der))
                    }
                    tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(key.utf8), format: .pem))
                }
            }
        } catch {
            throw APIEngine.Trust.Failure(
                host: host, reason: .invalidConfiguration, detail: "NIOSSL could not read it: \(error)")
        }
        configuration.tlsConfiguration = tls
        // A rule that trusts its roots alone, each of them pinned, is kept by NIOSSL's verification:
        // whichever root a chain ends at is pinned.
        let rootsArePinned =
            !rule.trustsSystemRoots && !rule.roots.isEmpty
            && rule.roots.allSatisfy { rule.pins.contains($0.publicKeyPin) }
        if !rule.pins.isEmpty && !rootsArePinned {
            let pinnedRoots = rule.roots.map(\.publicKeyPin).filter(rule.pins.contains)
            let advice =
                pinnedRoots.isEmpty
                ? nil
                : "AsyncHTTPClientTransport compares pins with the server's own key only: to pin the root "
                    + "\(pinnedRoots.map(\.description).joined(separator: ", ")), make it the rule's only root "
                    + "(trustsSystemRoots: false)"
            let pins = APIEngine.Trust(APIEngine.Trust.Rule(pins: rule.pins))
            configuration.http1_1ConnectionDebugInitializer = Self.checkingPins(
                pins, advice: advice, then: configuration.http1_1ConnectionDebugInitializer)
            configuration.http2ConnectionDebugInitializer = Self.checkingPins(
                pins, advice: advice, then: configuration.http2ConnectionDebugInitializer)
        }
        return configuration
    }

    /// A connection initializer that fails a connection whose server's key matches none of the
    /// pins (AsyncHTTPClient calls it once the TLS handshake is done, before the connection carries
    /// a request), then calls `next` (one the configuration had).
    static func checkingPins(
        _ pins: APIEngine.Trust, advice: String?, then next: (@Sendable (Channel) -> EventLoopFuture<Void>)?
    ) -> @Sendable (Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit { () -> [Data]? in
                // No TLS handler: a plain `http` connection, which pins are not about.
                guard let handler = try? channel.pipeline.syncOperations.handler(type: NIOSSLHandler.self) else {
                    return nil
                }
                return try handler.peerCertificate.map { [Data(try $0.toDERBytes())] } ?? []
            }.flatMapThrowing { certificates in
                if let certificates, let failure = pins.checkPins(host: "", certificates: certificates) {
                    guard let advice else { throw failure }
                    throw APIEngine.Trust.Failure(
                        host: failure.host, reason: failure.reason,
                        detail: [failure.detail, advice].compactMap { $0 }
                            .joined(separator: "; "))
                }
            }.flatMap {
                next?(channel) ?? channel.eventLoop.makeSucceededVoidFuture()
            }
        }
    }

    /// NIOSSL's words for a failed handshake as a trust failure about `host`, or `nil` for an error
    /// that is not about trust.
    static func trustFailure(_ error: any Error, host: String) -> APIEngine.Trust.Failure? {
        if let failure = error as? APIEngine.Trust.Failure { return failure.about(host: host) }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return APIEngine.Trust.Failure(host: host, reason: .wrongHost, detail: "\(error)")
        }
        // A handshake that failed on our side is an `NIOSSLError`; an alert the server sent after it
        // (TLS 1.3's `certificate_required`) arrives as a `BoringSSLError` on the first read.
        guard error is NIOSSLError || error is BoringSSLError else { return nil }
        // BoringSSL's reasons (`…:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at file:line`), without
        // the source locations.
        let words = "\(error)".components(separatedBy: "OPENSSL_internal:").dropFirst()
            .map { $0.prefix { $0 != " " && $0 != "]" } }.joined(separator: ", ")
        // The alerts a server sends when it refuses the client's certificate, or that none was shown.
        let refusals = ["CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "ACCESS_DENIED"]
        let reason: APIEngine.Trust.Failure.Reason =
            words.contains("CERTIFICATE_VERIFY_FAILED")
            ? .untrustedRoot
            : refusals.contains(where: words.contains) ? .clientCertificateRefused : .handshakeFailed
        let detail = words.isEmpty ? "\(error)" : "BoringSSL: \(words)"
        return APIEngine.Trust.Failure(host: host, reason: reason, detail: detail)
    }
}
