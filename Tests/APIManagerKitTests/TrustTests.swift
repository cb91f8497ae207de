import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Certificates made with openssl, and the pins openssl computed for them
/// (`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`,
/// OkHttp's recipe): the reads of the library are checked against another implementation.
enum TrustVectors {
    /// A v3 root with an EC P-256 key.
    static let ecRoot = """
        -----BEGIN CERTIFICATE-----
        MIIBujCCAV+gAwIBAgIUHGwKijZgvnFmb6Vm1vZrovc+u7kwCgYIKoZIzj0EAwIw
        MjEcMBoGA1UECgwTQVBJTWFuYWdlcktpdCB0ZXN0czESMBAGA1UEAwwJVGVzdCBy
        b290MB4XDTI2MTEyOTA5MTcyOFoXDTM2MTEyNjA5MTcyOFowMjEcMBoGA1UECgwT
        QVBJTWFuYWdlcktpdCB0ZXN0czESMBAGA1UEAwwJVGVzdCByb290MFkwEwYHKoZI
        zj0CAQYIKoZIzj0DAQcDQgAEFTf/lm2iMADY6oTbqpk5znXZBJRgHc9qG+AO0V/1
        KEEiZK3YFvewc9GewXgMub5iZ9A85+eTX4MptzzUnNlPLKNTMFEwHQYDVR0OBBYE
        FJcDvdbvm+8Nz9MUcbXjTV2pJukPMB8GA1UdIwQYMBaAFJcDvdbvm+8Nz9MUcbXj
        TV2pJukPMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIhAMw0FRkt
        RebiFqAy9VlNK9j1tfLom3P5PZhOnqwptc2cAiEA884vaHDjA2I5+iQSkRNzxnC0
        /GrFINjKG+J6kiG83qk=
        -----END CERTIFICATE-----
        """
    static let ecRootPin = "lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI="
    /// A v3 certificate with an RSA 2048 key (its SubjectPublicKeyInfo has a long-form length).
    static let rsa = """
        -----BEGIN CERTIFICATE-----
        MIIDBzCCAe+gAwIBAgIUNeSayUOJdP54+9bOwE9FAebipC0wDQYJKoZIhvcNAQEL
        BQAwEzERMA8GA1UEAwwIUlNBIGxlYWYwHhcNMjYxMTI5MDkxNzI4WhcNMzYxMTI2
        MDkxNzI4WjATMREwDwYDVQQDDAhSU0EgbGVhZjCCASIwDQYJKoZIhvcNAQEBBQAD
        ggEPADCCAQoCggEBANqFq2J8R/mwW1NNcRAyUmkAX0y+5djdSId5aNAneTgw4Xsb
        uArwnhzWNQGTEv3BsDB/SU8UK/0TFHIAPLpUoBtwaOvqlPfM+FVDuEJrxZEnK9Fg
        OYyqdtiLVzxblg3BYdHcsXBc+xxE2145DFykOYZUEIoOngJA82uLxiQTq2RLcAnO
        czXCNufDrFZGnRy7mlGm+Uo+8iqnEHvy3TjlEIqiSoimP51SYtIhr75TRnh++CI7
        zfZenmgrIznI1Id/m6gbx+Pg5swhvdJsPULHtVuOFv2E/vfad2IJFjIDq50UcTj+
        WJf/ddYeidg13xdhMQyZD/qvepbS4+LrpTA4YaUCAwEAAaNTMFEwHQYDVR0OBBYE
        FPxiY01HNmOKhfrdWdIkJNRPiIRCMB8GA1UdIwQYMBaAFPxiY01HNmOKhfrdWdIk
        JNRPiIRCMA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZIhvcNAQELBQADggEBAHBHocjY
        sJPaPC0vMBTjxLdeeDN7qjLdrpi2tWbub2/ud/gSJTo7TZcO6laYSMo2f1YTkiv4
        s2DYHlFeauP2ZSSqQ2ZEYlvBjmEfWgv2jv+7lnmSdTjiQXaKlNCsoAw0wxoVhuTt
        HY1AhUGf9kF5F4YonkgkP6BZFD/wCLThBKIbNM4s/eBR019caB7U5gPSsE+KOOTv
        fYdduUF7txPd9RkSnl+jR8jv/hNSdIKeO5NR1bqPJ+PKeXdg5o56gEAd5TUda3YO
        2YkIi63NEcxJ0BsKLoyWH24RQ1Jqtmgo10TosxFoplT/Etj2sa90ItxWdjqarx1l
        m20O9TGYkxRN158=
        -----END CERTIFICATE-----
        """
    static let rsaPin = "lmHwjeH5lL4bRHUCwCObVDnbsB9mMXq9oyocfCfZ6ac="
    /// A v1 certificate (no version field) with the EC root's key: the same pin.
    static let v1 = """
        -----BEGIN CERTIFICATE-----
        MIIBFDCBuwIUee6s6r3i18VcUGvtpv2JAun+U60wCgYIKoZIzj0EAwIwDTELMAkG
        A1UEAwwCdjEwHhcNMjYxMTI5MDkxNzI4WhcNMzYxMTI2MDkxNzI4WjANMQswCQYD
        VQQDDAJ2MTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABBU3/5ZtojAA2OqE26qZ
        Oc512QSUYB3PahvgDtFf9ShBImSt2Bb3sHPRnsF4DLm+YmfQPOfnk1+DKbc81JzZ
        TywwCgYIKoZIzj0EAwIDSAAwRQIgEvDNcLCPKn8MYMHCVqWuSZi//03bp3XH0VVX
        s7BABlcCIQCPTudj+S8ztdu7plXOWLN32W562OKfXzcDuenztyWweA==
        -----END CERTIFICATE-----
        """
}

@Suite("Trust: certificates, pins and host rules")
struct TrustRuleTests {
    @Test func aCertificatesPinIsTheOneOpenSSLComputes() throws {
        #expect(
            try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot).publicKeyPin.description
                == "sha256/" + TrustVectors.ecRootPin)
        #expect(
            try APIEngine.Trust.Certificate(pem: TrustVectors.rsa).publicKeyPin
                == APIEngine.Trust.Pin(TrustVectors.rsaPin))
        // The key is what is pinned, not the certificate: a v1 certificate of the same key has its pin.
        #expect(
            try APIEngine.Trust.Certificate(pem: TrustVectors.v1).publicKeyPin
                == APIEngine.Trust.Pin(TrustVectors.ecRootPin))
    }

    @Test func aPEMTextGivesEveryCertificateInOrder() throws {
        let bundle = "# roots\n" + TrustVectors.rsa + "\n\n" + TrustVectors.ecRoot + "\n"
        let all = try APIEngine.Trust.Certificate.all(pem: bundle)
        #expect(
            all.map(\.publicKeyPin) == [
                try APIEngine.Trust.Pin(TrustVectors.rsaPin), try APIEngine.Trust.Pin(TrustVectors.ecRootPin),
            ])
        #expect(throws: APIEngine.Trust.Failure.self) { try APIEngine.Trust.Certificate(pem: bundle) }
        #expect(throws: APIEngine.Trust.Failure.self) { try APIEngine.Trust.Certificate.all(pem: "no certificate") }
        let der = try #require(APIEngine.Trust.Certificate.all(pem: TrustVectors.rsa).first?.der)
        #expect(try APIEngine.Trust.Certificate(der: der).der == der)
    }

    @Test func bytesThatAreNotACertificateFailWithATypedError() {
        let der = (try? APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot).der) ?? Data()
        let damaged: [Data] = [
            Data(), Data([0x30]), Data([0x30, 0x80, 0x00, 0x00]),  // indefinite length
            Data([0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]),  // past the end
            Data([0x30, 0x81, 0x05, 1, 2, 3, 4, 5]),  // a long form where the short one fits
            der.prefix(der.count - 1), der + Data([0]), Data(der.reversed()),
            Data(repeating: 0x30, count: 64),
        ]
        for bytes in damaged {
            #expect(throws: APIEngine.Trust.Failure.self) { try APIEngine.Trust.Certificate(der: bytes) }
        }
        // Every single-byte change either still reads or fails with the error: never a trap.
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var bytes = [UInt8](der)
            bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            _ = try? APIEngine.Trust.Certificate(der: Data(bytes))
        }
        let failure = #expect(throws: APIEngine.Trust.Failure.self) {
            try APIEngine.Trust.Certificate(der: Data([1, 2]))
        }
        #expect(failure?.reason == .invalidConfiguration)
    }

    /// OkHttp's CertificatePinnerTest: malformedPin, malformedBase64, testBadPin, testBadAlgorithm, testGoodPin.
    @Test func pinsAreWrittenAsOkHttpWritesThem() throws {
        for bad in [
            "md5/DmxUShsZuNiqPQsX2Oi9uv2sCnw=", "sha1/DmxUShsZuNiqPQsX2Oi9uv2sCnw*", "sha256/a",
            "sha512/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "", "sha256/",
        ] {
            #expect(throws: APIEngine.Trust.Failure.self, "\(bad)") { try APIEngine.Trust.Pin(bad) }
        }
        let good = try APIEngine.Trust.Pin("sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        #expect(good.sha256 == Data(count: 32))
        #expect(try APIEngine.Trust.Pin("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n") == good)
        #expect(good.description == "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    }

    /// OkHttp's CertificatePinnerTest: checkForHostnameWithDoubleAsterisk, testGoodPin,
    /// successfulCheckForWildcardHostname, testBadHost; and the most specific rule wins.
    @Test func hostPatternsMatchAsOkHttpsDo() throws {
        let pinned = APIEngine.Trust.Rule(pins: [try APIEngine.Trust.Pin(TrustVectors.ecRootPin)])
        let deep = APIEngine.Trust(hosts: ["**.example.co.uk": pinned])
        for host in [
            "example.co.uk", "foo.example.co.uk", "foo.bar.example.co.uk", "foo.bar.baz.example.co.uk",
            "www.example.co.uk", "gopher.example.co.uk", "FOO.Example.co.uk.",
        ] {
            #expect(deep.pattern(forHost: host) == "**.example.co.uk", "\(host)")
        }
        for host in ["uk", "co.uk", "anotherexample.co.uk", "foo.anotherexample.co.uk", "www.example.com"] {
            #expect(deep.pattern(forHost: host) == nil, "\(host)")
        }
        let one = APIEngine.Trust(hosts: ["*.example.com": pinned])
        #expect(one.pattern(forHost: "a.example.com") == "*.example.com")
        #expect(one.pattern(forHost: "example.com") == nil)
        #expect(one.pattern(forHost: "a.b.example.com") == nil)
        let all = APIEngine.Trust(
            hosts: [
                "**.example.com": pinned, "*.example.com": pinned, "a.example.com": pinned, "**.b.example.com": pinned,
            ])
        #expect(all.pattern(forHost: "a.example.com") == "a.example.com")
        #expect(all.pattern(forHost: "c.example.com") == "*.example.com")
        #expect(all.pattern(forHost: "x.y.example.com") == "**.example.com")
        #expect(all.pattern(forHost: "x.y.b.example.com") == "**.b.example.com")
        #expect(all.pattern(forHost: "b.example.com") == "*.example.com")
        for bad in ["example.*", "*", "**.", "a..example.com", "*.*.example.com", ""] {
            #expect(throws: APIEngine.Trust.Failure.self, "\(bad)") {
                try APIEngine.Trust(hosts: [bad: pinned]).validate()
            }
        }
        try all.validate()
        #expect(APIEngine.Trust(hosts: ["[::1]": pinned]).pattern(forHost: "::1") == "[::1]")
    }

    /// OkHttp's CertificatePinnerTest: successfulCheck, unsuccessfulCheck,
    /// successfulMatchAcceptsAnyMatchingCertificate, multipleCertificatesForOneHostname, absentHostnameMatches.
    @Test func aServerPassesWhenAnyOfItsCertificatesMatchesAnyPin() throws {
        let ec = try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot)
        let rsa = try APIEngine.Trust.Certificate(pem: TrustVectors.rsa)
        let trust = APIEngine.Trust(hosts: ["example.com": APIEngine.Trust.Rule(pins: [rsa.publicKeyPin])])
        #expect(trust.checkPins(host: "example.com", certificates: [rsa.der]) == nil)
        #expect(trust.checkPins(host: "example.com", certificates: [ec.der, rsa.der]) == nil)
        #expect(trust.checkPins(host: "other.example", certificates: [ec.der]) == nil)  // no rule, no pins
        let failure = try #require(trust.checkPins(host: "example.com", certificates: [ec.der]))
        #expect(failure.reason == .pinMismatch)
        #expect(failure.host == "example.com")
        #expect(failure.description.contains("example.com"))
        #expect(failure.description.contains(ec.publicKeyPin.description))  // what it showed
        #expect(failure.description.contains(rsa.publicKeyPin.description))  // what was pinned
        #expect(trust.checkPins(host: "example.com", certificates: [Data([1, 2, 3])])?.reason == .pinMismatch)
        #expect(trust.checkPins(host: "example.com", certificates: [])?.reason == .pinMismatch)
        let rotated = APIEngine.Trust(APIEngine.Trust.Rule(pins: [ec.publicKeyPin, rsa.publicKeyPin]))
        #expect(rotated.checkPins(host: "any.example", certificates: [ec.der]) == nil)
        #expect(rotated.checkPins(host: "any.example", certificates: [rsa.der]) == nil)
    }

    @Test func aFailureInsideAnAPIErrorNamesTheHostAndTheReason() {
        let failure = APIEngine.Trust.Failure(host: "api.bank.example", reason: .expired, detail: "valid to 2020")
        let error = APIError.transport(underlying: failure)
        #expect(error.localizedDescription.contains("api.bank.example"))
        #expect(error.localizedDescription.contains("expired"))
        #expect(failure.about(host: "other.example").host == "other.example")
        #expect(failure.about(host: "other.example").reason == .expired)
        #expect(!APIRetryPolicy.default.isRetryable(error, method: .get))
    }

    @Test func anIdentitySaysItsFormNeverItsSecrets() throws {
        let p12 = APIEngine.Trust.Identity.pkcs12(Data(count: 100), password: "hunter2")
        #expect(p12.description == "Identity(PKCS #12, 100 bytes)")
        #expect(p12.pkcs12?.password == "hunter2")
        #expect(p12.pem == nil)
        let pem = APIEngine.Trust.Identity.pem(
            certificateChain: [try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot)],
            privateKey: "-----BEGIN PRIVATE KEY-----")
        #expect(!pem.description.contains("PRIVATE"))
        #expect(pem.pem?.certificateChain.count == 1)
        #expect(pem.pkcs12 == nil)
    }

    @Test func theSystemsTrustIsTheDefault() throws {
        #expect(APIEngine.Trust.system.isSystemTrust)
        #expect(APIEngine.Trust().rule(forHost: "example.com") == APIEngine.Trust.Rule())
        var trust = APIEngine.Trust()
        trust.hosts["example.com"] = APIEngine.Trust.Rule(trustsSystemRoots: false)
        #expect(!trust.isSystemTrust)
        #expect(trust.rule(forHost: "example.com").trustsSystemRoots == false)
        #expect(trust.rule(forHost: "other.example").trustsSystemRoots)
    }

    @Test func urlSessionTransportTakesTheSystemsTrustEverywhereAndRefusesMoreOnLinux() throws {
        _ = try URLSessionTransport(trust: .system)
        let pinned = APIEngine.Trust(APIEngine.Trust.Rule(pins: [try APIEngine.Trust.Pin(TrustVectors.ecRootPin)]))
        let rooted = APIEngine.Trust(
            APIEngine.Trust.Rule(roots: [try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot)]))
        let identified = APIEngine.Trust(hosts: [
            "a.example": APIEngine.Trust.Rule(identity: .pkcs12(Data(), password: ""))
        ])
        #if canImport(FoundationNetworking)
        for trust in [pinned, rooted, identified] {
            let failure = #expect(throws: APIEngine.Trust.Failure.self) { try URLSessionTransport(trust: trust) }
            #expect(failure?.reason == .unsupportedByTransport)
            #expect(failure?.description.contains("AsyncHTTPClientTransport") == true)
        }
        #else
        _ = try URLSessionTransport(trust: pinned)
        _ = try URLSessionTransport(trust: rooted)
        #expect(throws: APIEngine.Trust.Failure.self) { try URLSessionTransport(trust: identified) }  // not a PKCS #12
        #endif
        #expect(throws: APIEngine.Trust.Failure.self) {
            try URLSessionTransport(trust: APIEngine.Trust(hosts: ["a.*.example": APIEngine.Trust.Rule()]))
        }
    }
}

#if !canImport(FoundationNetworking) && canImport(Security)
import Security

/// The `SecTrust` side of ``URLSessionTransport`` (Apple platforms only; compiled and run by the
/// macOS job of the workflow).
@Suite("Trust: URLSessionTransport's SecTrust evaluation")
struct ServerTrustEvaluatorTests {
    @Test func securitysCodesBecomeTheReasons() {
        #expect(ServerTrustEvaluator.reason(ofStatus: Int(errSecCertificateExpired)) == .expired)
        #expect(ServerTrustEvaluator.reason(ofStatus: Int(errSecCertificateNotValidYet)) == .expired)
        #expect(ServerTrustEvaluator.reason(ofStatus: Int(errSecHostNameMismatch)) == .wrongHost)
        #expect(ServerTrustEvaluator.reason(ofStatus: Int(errSecNotTrusted)) == .untrustedRoot)
        #expect(ServerTrustEvaluator.reason(ofStatus: -1) == .handshakeFailed)
    }

    @Test func aChainOfAnotherRootFailsNamingTheHost() throws {
        let rsa = try APIEngine.Trust.Certificate(pem: TrustVectors.rsa)
        let ecRoot = try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot)
        let certificate = try #require(SecCertificateCreateWithData(nil, rsa.der as CFData))
        var serverTrust: SecTrust?
        SecTrustCreateWithCertificates(certificate, SecPolicyCreateSSL(true, "api.example" as CFString), &serverTrust)
        let rule = APIEngine.Trust.Rule(roots: [ecRoot], trustsSystemRoots: false)
        let evaluator = try ServerTrustEvaluator(APIEngine.Trust(rule))
        let failure = evaluator.evaluate(try #require(serverTrust), host: "api.example", rule: rule)
        #expect(failure?.host == "api.example")
        #expect(failure != nil)
    }

    @Test func identitiesSecurityCannotReadAreRefusedWhenTheTransportIsMade() throws {
        let pem = APIEngine.Trust.Identity.pem(
            certificateChain: [try APIEngine.Trust.Certificate(pem: TrustVectors.ecRoot)], privateKey: "")
        let refused = #expect(throws: APIEngine.Trust.Failure.self) {
            try URLSessionTransport(trust: APIEngine.Trust(APIEngine.Trust.Rule(identity: pem)))
        }
        #expect(refused?.reason == .unsupportedByTransport)
        let damaged = #expect(throws: APIEngine.Trust.Failure.self) {
            try URLSessionTransport(
                trust: APIEngine.Trust(APIEngine.Trust.Rule(identity: .pkcs12(Data([1, 2, 3]), password: "x"))))
        }
        #expect(damaged?.reason == .invalidConfiguration)
    }
}
#endif
