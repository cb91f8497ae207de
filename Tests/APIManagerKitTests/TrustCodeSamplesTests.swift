// The samples of the "Trust and pinning" article that need the library alone, compiled and run here
// (Scripts/check-doc-counts.py fails when one is not here, or in the AsyncHTTPClient package's
// CodeSamplesTests for the one that names its transport, word for word).
import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct TrustSamples {
    static let rootPEM = TrustVectors.ecRoot
    static let p12Data = Data([0x30, 0x03, 0x02, 0x01, 0x03])
    static let p12Password = "from the keychain"

    static func makeTrust() throws -> APIEngine.Trust {
        let ourRoot = try APIEngine.Trust.Certificate(pem: rootPEM)
        var trust = APIEngine.Trust()
        trust.hosts["api.bank.example"] = APIEngine.Trust.Rule(
            roots: [ourRoot],
            pins: [
                try APIEngine.Trust.Pin("sha256/lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI="),  // the key in use
                try APIEngine.Trust.Pin("sha256/lmHwjeH5lL4bRHUCwCObVDnbsB9mMXq9oyocfCfZ6ac="),  // the next one
            ])
        return trust
    }

    static func makeEngine(trust: APIEngine.Trust) throws -> APIEngine {
        var configuration = APIEngine.Configuration()
        configuration.transport = try URLSessionTransport(trust: trust)  // Apple platforms; refused on Linux
        let engine = APIEngine(configuration: configuration)
        return engine
    }

    static func makeMutual() -> APIEngine.Trust {
        let identity = APIEngine.Trust.Identity.pkcs12(p12Data, password: p12Password)
        let mutual = APIEngine.Trust(APIEngine.Trust.Rule(identity: identity))
        return mutual
    }

    func message(for error: APIError) -> String {
        guard case .transport(let failure as APIEngine.Trust.Failure) = error else { return error.localizedDescription }
        switch failure.reason {
        case .pinMismatch: return "\(failure.host) is not the server we know. Your connection may be watched."
        case .expired: return "\(failure.host) has an expired certificate."
        default: return "\(failure.host) is not trusted: \(failure.reason)."
        }
    }
}

@Suite("Trust and pinning: the article's samples")
struct TrustCodeSamplesTests {
    @Test func theTrustPinsTheBanksHostAlone() throws {
        let trust = try TrustSamples.makeTrust()
        #expect(trust.rule(forHost: "api.bank.example").pins.count == 2)
        #expect(
            trust.rule(forHost: "api.bank.example").roots.first?.publicKeyPin.description
                == "sha256/lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI=")
        #expect(trust.rule(forHost: "cdn.example").isSystemTrust)
    }

    @Test func urlSessionTakesItOnApplePlatformsAndRefusesItOnLinux() throws {
        let trust = try TrustSamples.makeTrust()
        #if canImport(FoundationNetworking)
        let failure = #expect(throws: APIEngine.Trust.Failure.self) { try TrustSamples.makeEngine(trust: trust) }
        #expect(failure?.reason == .unsupportedByTransport)
        #else
        #expect(try TrustSamples.makeEngine(trust: trust).transport is URLSessionTransport)
        #endif
    }

    @Test func theMutualTrustShowsItsIdentityToEveryHost() {
        let mutual = TrustSamples.makeMutual()
        #expect(mutual.rule(forHost: "any.example").identity?.pkcs12?.password == "from the keychain")
        #expect(mutual.rule(forHost: "any.example").roots.isEmpty)
    }

    @Test func theMessageSaysWhatHappenedToWhichHost() {
        let samples = TrustSamples()
        let pin = APIError.transport(
            underlying: APIEngine.Trust.Failure(host: "api.bank.example", reason: .pinMismatch))
        #expect(samples.message(for: pin).hasPrefix("api.bank.example is not the server we know"))
        let expired = APIError.transport(underlying: APIEngine.Trust.Failure(host: "a.example", reason: .expired))
        #expect(samples.message(for: expired) == "a.example has an expired certificate.")
        let root = APIError.transport(underlying: APIEngine.Trust.Failure(host: "a.example", reason: .untrustedRoot))
        #expect(samples.message(for: root).contains("does not end at a trusted root"))
        #expect(samples.message(for: APIError.ignored) == APIError.ignored.localizedDescription)
    }
}
