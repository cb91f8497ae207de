#if !canImport(FoundationNetworking) && canImport(Security)
import Foundation
import Security

/// How ``URLSessionTransport`` answers the challenges of a trust of the app's own on Apple
/// platforms: the server's trust evaluated with `SecTrust`, then the pins; a client-certificate
/// challenge answered with the rule's identity, imported once when the transport is made.
struct ServerTrustEvaluator: @unchecked Sendable {
    // @unchecked: `URLCredential` is immutable once made and Security's objects are thread-safe.
    let trust: APIEngine.Trust
    /// The credential of each rule with an identity, by its key in `trust.hosts` ("" for the rule
    /// of every host).
    let credentials: [String: URLCredential]

    enum Answer {
        case untrusted(APIEngine.Trust.Failure)
        case use(URLCredential)
        case defaultHandling
    }

    init(_ trust: APIEngine.Trust) throws {
        self.trust = trust
        var credentials: [String: URLCredential] = [:]
        if let identity = trust.rule.identity { credentials[""] = try Self.credential(identity, host: "") }
        for (pattern, rule) in trust.hosts {
            if let identity = rule.identity { credentials[pattern] = try Self.credential(identity, host: pattern) }
        }
        self.credentials = credentials
    }

    func answer(_ challenge: URLAuthenticationChallenge) -> Answer {
        let space = challenge.protectionSpace
        switch space.authenticationMethod {
        case NSURLAuthenticationMethodServerTrust:
            guard let serverTrust = space.serverTrust else { return .defaultHandling }
            let rule = trust.rule(forHost: space.host)
            // A rule with an identity alone leaves the server to the system's trust.
            if rule.roots.isEmpty && rule.pins.isEmpty && rule.trustsSystemRoots { return .defaultHandling }
            if let failure = evaluate(serverTrust, host: space.host, rule: rule) { return .untrusted(failure) }
            return .use(URLCredential(trust: serverTrust))
        case NSURLAuthenticationMethodClientCertificate:
            guard let credential = credentials[trust.pattern(forHost: space.host) ?? ""] else {
                return .defaultHandling
            }
            return .use(credential)
        default:
            return .defaultHandling
        }
    }

    /// The host-name policy, the rule's roots as anchors (alone unless the system's are trusted
    /// too), then the pins against every certificate of the evaluated chain.
    func evaluate(_ serverTrust: SecTrust, host: String, rule: APIEngine.Trust.Rule) -> APIEngine.Trust.Failure? {
        SecTrustSetPolicies(serverTrust, SecPolicyCreateSSL(true, host as CFString))
        if !rule.roots.isEmpty {
            let anchors = rule.roots.compactMap { SecCertificateCreateWithData(nil, $0.der as CFData) }
            SecTrustSetAnchorCertificates(serverTrust, anchors as CFArray)
            SecTrustSetAnchorCertificatesOnly(serverTrust, !rule.trustsSystemRoots)
        }
        var error: CFError?
        guard SecTrustEvaluateWithError(serverTrust, &error) else {
            let code = error.map { CFErrorGetCode($0) } ?? 0
            let detail = error.map { CFErrorCopyDescription($0) as String }
            return APIEngine.Trust.Failure(host: host, reason: Self.reason(ofStatus: code), detail: detail)
        }
        let chain = (SecTrustCopyCertificateChain(serverTrust) as? [SecCertificate]) ?? []
        return trust.checkPins(host: host, certificates: chain.map { SecCertificateCopyData($0) as Data })
    }

    static func reason(ofStatus code: Int) -> APIEngine.Trust.Failure.Reason {
        switch code {
        case Int(errSecCertificateExpired), Int(errSecCertificateNotValidYet): return .expired
        case Int(errSecHostNameMismatch): return .wrongHost
        case Int(errSecNotTrusted), Int(errSecCreateChainFailed): return .untrustedRoot
        default: return .handshakeFailed
        }
    }

    /// The identity's credential, from its PKCS #12 (Security imports keys from no other form).
    static func credential(_ identity: APIEngine.Trust.Identity, host: String) throws -> URLCredential {
        guard let (data, password) = identity.pkcs12 else {
            throw APIEngine.Trust.Failure(
                host: host, reason: .unsupportedByTransport,
                detail: "URLSessionTransport reads a client identity from PKCS #12 only: give Identity.pkcs12")
        }
        var items: CFArray?
        let options = [kSecImportExportPassphrase as String: password] as CFDictionary
        let status = SecPKCS12Import(data as CFData, options, &items)
        guard status == errSecSuccess, let first = (items as? [[String: Any]])?.first,
            let object = first[kSecImportItemIdentity as String].map({ $0 as AnyObject }),
            CFGetTypeID(object) == SecIdentityGetTypeID()
        else {
            throw APIEngine.Trust.Failure(
                host: host, reason: .invalidConfiguration,
                detail: "the PKCS #12 identity could not be read (status \(status)): a wrong password, or no key in it")
        }
        let identity = unsafeDowncast(object, to: SecIdentity.self)
        // The chain past the client's own certificate, for servers that need the intermediates.
        let chain = ((first[kSecImportItemCertChain as String] as? [AnyObject]) ?? [])
            .filter { CFGetTypeID($0) == SecCertificateGetTypeID() }.dropFirst()
        return URLCredential(identity: identity, certificates: Array(chain), persistence: .forSession)
    }
}
#endif
