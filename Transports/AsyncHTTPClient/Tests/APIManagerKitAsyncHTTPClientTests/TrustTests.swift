import APIManagerKit
import APIManagerKitAsyncHTTPClient
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The TLS servers and the test PKI Scripts/tls-server.sh made, from the environment.
enum TLS {
    static let environment = ProcessInfo.processInfo.environment
    static let certificates = environment["APIMANAGERKIT_TLS_CERTIFICATES"].map { URL(fileURLWithPath: $0) }
    static let accessLog = environment["APIMANAGERKIT_TLS_ACCESS_LOG"].map { URL(fileURLWithPath: $0) }
    static let isAvailable = certificates != nil && accessLog != nil && server("SERVER") != nil
    static let skipReason: Comment =
        "APIMANAGERKIT_TLS_SERVER is not set: the trust tests are SKIPPED. Run `bash Scripts/test.sh`, which starts the TLS servers."

    /// The server of a case: SERVER (ours, valid), EXPIRED, WRONG_HOST, UNKNOWN_ROOT, MUTUAL.
    static func server(_ name: String) -> URL? { environment["APIMANAGERKIT_TLS_\(name)"].flatMap(URL.init(string:)) }
    static func url(_ name: String) -> URL { server(name) ?? URL(fileURLWithPath: "/") }

    static func file(_ name: String) throws -> Data {
        try Data(contentsOf: (certificates ?? URL(fileURLWithPath: "/")).appendingPathComponent(name))
    }

    static func certificate(_ name: String) throws -> APIEngine.Trust.Certificate {
        try APIEngine.Trust.Certificate(pem: String(decoding: try file("\(name).pem"), as: UTF8.self))
    }

    /// The pin openssl made for a certificate (its key's SHA-256, base64).
    static func pin(_ name: String) throws -> APIEngine.Trust.Pin {
        try APIEngine.Trust.Pin(String(decoding: try file("\(name).pin"), as: UTF8.self))
    }

    static var ourRoot: APIEngine.Trust.Rule {
        get throws { APIEngine.Trust.Rule(roots: [try certificate("ca")]) }
    }
}

struct Greeting: APIResponse, Decodable {
    var server: String?
    var client: String?
}

@Suite("AsyncHTTPClientTransport: TLS trust against nginx", .enabled(if: TLS.isAvailable, TLS.skipReason))
struct TrustTests {
    /// Sends a request to a TLS server of the test PKI through a transport with `trust`.
    func send(
        _ server: String, path: String = "/", method: HTTPMethod = .get, host: String? = nil,
        trust: APIEngine.Trust
    ) async throws -> Result<Greeting, APIError> {
        let transport = try AsyncHTTPClientTransport(trust: trust)
        defer { Task { try? await transport.shutdown() } }
        var request = HTTPRequest(path, method: method)
        var components = URLComponents(url: TLS.url(server), resolvingAgainstBaseURL: false)
        if let host { components?.host = host }
        request.url = components?.url ?? TLS.url(server)
        if method == .post {
            request.body = APIRequestBody(data: Data(repeating: 0x41, count: 64 << 10), contentType: "text/plain")
        }
        do {
            return .success(try await Client<Greeting>(transport: transport).response(for: request))
        } catch {
            return .failure(error)
        }
    }

    func trustFailure(_ result: Result<Greeting, APIError>) -> APIEngine.Trust.Failure? {
        guard case .failure(.transport(let failure as APIEngine.Trust.Failure)) = result else { return nil }
        return failure
    }

    @Test func aServerOfOurRootIsTrusted() async throws {
        let result = try await send("SERVER", trust: APIEngine.Trust(try TLS.ourRoot))
        #expect(try result.get().server == "trusted")
    }

    @Test func withoutOurRootTheSystemDoesNotTrustIt() async throws {
        let failure = trustFailure(try await send("SERVER", trust: .system))
        #expect(failure?.reason == .untrustedRoot)
        #expect(failure?.host == "127.0.0.1")
    }

    @Test func theRightPinPassesAndSoDoesTheNextOneBesideIt() async throws {
        var rule = try TLS.ourRoot
        rule.pins = [try TLS.pin("server")]
        #expect(try await send("SERVER", trust: APIEngine.Trust(rule)).get().server == "trusted")
        rule.pins = [try TLS.pin("other-ca"), try TLS.pin("server")]
        #expect(try await send("SERVER", trust: APIEngine.Trust(rule)).get().server == "trusted")
    }

    @Test func aWrongPinFailsNamingTheHostAndSendsNothing() async throws {
        var rule = try TLS.ourRoot
        rule.pins = [try TLS.pin("other-ca")]
        let path = "/pinned-\(UUID().uuidString)"
        let failure = trustFailure(try await send("SERVER", path: path, method: .post, trust: APIEngine.Trust(rule)))
        #expect(failure?.reason == .pinMismatch)
        #expect(failure?.host == "127.0.0.1")
        let description = failure.map(String.init(describing:)) ?? ""
        #expect(description.contains("127.0.0.1") && description.contains("pin"))
        #expect(description.contains(try TLS.pin("server").description))  // what the server showed
        // The server never saw the request: nothing of it was sent.
        let log = String(
            decoding: (try? Data(contentsOf: TLS.accessLog ?? URL(fileURLWithPath: "/"))) ?? Data(), as: UTF8.self)
        #expect(!log.contains(path))
        // The same request with the right pin reaches it (the log is where a sent request shows).
        rule.pins = [try TLS.pin("server")]
        _ = try await send("SERVER", path: path, method: .post, trust: APIEngine.Trust(rule)).get()
        let after = String(
            decoding: (try? Data(contentsOf: TLS.accessLog ?? URL(fileURLWithPath: "/"))) ?? Data(), as: UTF8.self)
        #expect(after.contains("POST \(path) 200"))
    }

    @Test func aRootIsPinnedByMakingItTheOnlyRoot() async throws {
        // Pinning our root beside the system's: the server's own key is compared, and the failure says how to pin a root.
        var rule = try TLS.ourRoot
        rule.pins = [try TLS.pin("ca")]
        let failure = trustFailure(try await send("SERVER", trust: APIEngine.Trust(rule)))
        #expect(failure?.reason == .pinMismatch)
        #expect(failure?.detail?.contains("trustsSystemRoots: false") == true)
        // Our root alone, pinned: the chain must end at it, which NIOSSL checks.
        rule.trustsSystemRoots = false
        #expect(try await send("SERVER", trust: APIEngine.Trust(rule)).get().server == "trusted")
        let other = APIEngine.Trust.Rule(
            roots: [try TLS.certificate("other-ca")], trustsSystemRoots: false, pins: [try TLS.pin("other-ca")])
        #expect(trustFailure(try await send("SERVER", trust: APIEngine.Trust(other)))?.reason == .untrustedRoot)
    }

    @Test func anUnknownRootFailsAndSendsNothing() async throws {
        let path = "/unknown-root-\(UUID().uuidString)"
        let result = try await send("UNKNOWN_ROOT", path: path, method: .post, trust: APIEngine.Trust(try TLS.ourRoot))
        let failure = trustFailure(result)
        #expect(failure?.reason == .untrustedRoot)
        #expect(failure.map(String.init(describing:))?.contains("127.0.0.1") == true)
        let log = String(
            decoding: (try? Data(contentsOf: TLS.accessLog ?? URL(fileURLWithPath: "/"))) ?? Data(), as: UTF8.self)
        #expect(!log.contains(path))
    }

    @Test func onlyTheRulesRootsWhenTheSystemsAreOff() async throws {
        let other = APIEngine.Trust.Rule(roots: [try TLS.certificate("other-ca")], trustsSystemRoots: false)
        #expect(try await send("UNKNOWN_ROOT", trust: APIEngine.Trust(other)).get().server == "unknown root")
        #expect(trustFailure(try await send("SERVER", trust: APIEngine.Trust(other)))?.reason == .untrustedRoot)
    }

    @Test func anExpiredCertificateFails() async throws {
        let failure = trustFailure(try await send("EXPIRED", trust: APIEngine.Trust(try TLS.ourRoot)))
        #expect(failure?.reason == .expired, "\(String(describing: failure))")
    }

    @Test func aCertificateForAnotherHostFails() async throws {
        let failure = trustFailure(try await send("WRONG_HOST", trust: APIEngine.Trust(try TLS.ourRoot)))
        #expect(failure?.reason == .wrongHost)
        #expect(failure?.host == "127.0.0.1")
    }

    @Test func aServerThatRequiresAClientCertificateAcceptsOursInBothForms() async throws {
        var rule = try TLS.ourRoot
        rule.identity = .pkcs12(try TLS.file("client.p12"), password: "test")
        #expect(try await send("MUTUAL", trust: APIEngine.Trust(rule)).get().client?.contains("CN=client") == true)
        rule.identity = .pem(
            certificateChain: [try TLS.certificate("client")],
            privateKey: String(decoding: try TLS.file("client.key"), as: UTF8.self))
        #expect(try await send("MUTUAL", trust: APIEngine.Trust(rule)).get().client?.contains("CN=client") == true)
    }

    @Test func aServerThatRequiresAClientCertificateRefusesARequestWithout() async throws {
        // nginx finishes the handshake and answers 400 ("No required SSL certificate was sent").
        let result = try await send("MUTUAL", trust: APIEngine.Trust(try TLS.ourRoot))
        guard case .failure(.unacceptableStatus(let response, _)) = result else {
            Issue.record("expected a refusal, got \(result)")
            return
        }
        #expect(response.statusCode == 400)
    }

    @Test func aServerThatRefusesInTheHandshakeFailsAsARefusedClientCertificate() async throws {
        // tls_mutual_server.py asks TLS 1.3's certificate and sends `certificate_required` without one.
        let result = try await send("MUTUAL_STRICT", trust: APIEngine.Trust(try TLS.ourRoot))
        let failure = trustFailure(result)
        #expect(failure?.reason == .clientCertificateRefused, "\(result)")
        #expect(failure?.host == "127.0.0.1")
        var rule = try TLS.ourRoot
        rule.identity = .pkcs12(try TLS.file("client.p12"), password: "test")
        #expect(try await send("MUTUAL_STRICT", trust: APIEngine.Trust(rule)).get().client == "CN=client")
    }

    @Test func eachHostHasItsRule() async throws {
        // 127.0.0.1 is pinned to a key the server does not have; localhost keeps our root alone.
        var pinned = try TLS.ourRoot
        pinned.pins = [try TLS.pin("other-ca")]
        let trust = APIEngine.Trust(try TLS.ourRoot, hosts: ["127.0.0.1": pinned])
        #expect(trustFailure(try await send("SERVER", trust: trust))?.reason == .pinMismatch)
        #expect(try await send("SERVER", host: "localhost", trust: trust).get().server == "trusted")
        let wildcard = APIEngine.Trust(try TLS.ourRoot, hosts: ["**.localhost": pinned])
        let failure = trustFailure(try await send("SERVER", host: "localhost", trust: wildcard))
        #expect(failure?.reason == .pinMismatch)
        #expect(failure?.host == "localhost")
    }

    @Test func aTrustFailureIsNotRetried() async throws {
        let transport = try AsyncHTTPClientTransport(trust: .system)
        defer { Task { try? await transport.shutdown() } }
        let manager = Client<Greeting>(transport: transport)
        var request = HTTPRequest("/")
        request.url = TLS.url("SERVER")
        request.retryPolicy = APIRetryPolicy(maxAttempts: 3, baseDelay: 0.01)
        let (result, attempts) = await withCheckedContinuation { continuation in
            let sent = NSLock()
            nonisolated(unsafe) var task: APITask<HTTPRequest>?
            sent.withLock {
                task = manager.send(request) { result in
                    continuation.resume(returning: (result, sent.withLock { task?.attemptCount ?? 0 }))
                }
            }
        }
        #expect((trustFailure(result.map { _ in Greeting() }))?.reason == .untrustedRoot)
        #expect(attempts == 1)
    }

    @Test func plainHTTPIsSentAsBeforeByATransportWithPins() async throws {
        var rule = try TLS.ourRoot
        rule.pins = [try TLS.pin("server")]
        let transport = try AsyncHTTPClientTransport(trust: APIEngine.Trust(rule))
        defer { Task { try? await transport.shutdown() } }
        let echoed = try await Client<Echoed>(transport: transport).response(for: HTTPRequest("get"))
        #expect(echoed.url?.hasPrefix("http://") == true)
    }

    @Test func whatNIOSSLCannotReadIsRefusedWhenTheTransportIsMade() throws {
        var rule = APIEngine.Trust.Rule()
        rule.identity = .pkcs12(try TLS.file("client.p12"), password: "wrong")
        #expect(throws: APIEngine.Trust.Failure.self) { try AsyncHTTPClientTransport(trust: APIEngine.Trust(rule)) }
        let badPattern = APIEngine.Trust(hosts: ["api.*.example": APIEngine.Trust.Rule()])
        #expect(throws: APIEngine.Trust.Failure.self) { try AsyncHTTPClientTransport(trust: badPattern) }
    }
}
