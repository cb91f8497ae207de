import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Default headers: User-Agent, Accept-Language and the engine's own")
struct DefaultHeadersTests {
    @Test func everyRequestCarriesTheStandardUserAgentNamingThePackageAndItsVersion() {
        let harness = Harness()
        harness.send(TestRequest("/ok"))
        let agent = harness.records("/ok").first?.request.value(forHTTPHeaderField: "User-Agent")
        #expect(agent == APIEngine.DefaultHeaders.userAgent)
        #expect(
            agent?.contains(" APIManagerKit/\(APIEngine.DefaultHeaders.packageVersion) (") == true, "\(agent ?? "nil")")
        #expect(APIEngine.DefaultHeaders.standard["user-agent"] == APIEngine.DefaultHeaders.userAgent)
    }

    @Test(
        arguments: [
            (["fr-CH", "fr", "en"], "fr-CH, fr;q=0.9, en;q=0.8"),
            (["en"], "en"),
            (["a", "b", "c", "d", "e", "f", "g"], "a, b;q=0.9, c;q=0.8, d;q=0.7, e;q=0.6, f;q=0.5"),
            (["de\r\nX: y", "de"], "de"),
            ([], nil),
            ([""], nil),
        ] as [([String], String?)])
    func acceptLanguageListsThePreferredLanguagesWithFallingQualities(languages: [String], expected: String?) {
        #expect(APIEngine.DefaultHeaders.acceptLanguage(for: languages) == expected)
    }

    @Test func theEnginesHeadersAreAddedUnlessTheRequestSetsThemItself() {
        var headers = APIEngine.DefaultHeaders.standard
        headers["X-Api-Key"] = "k1"
        headers["user-agent"] = "Shop/2.1"  // replaces User-Agent, whatever its case
        headers["Accept-Language"] = nil
        let harness = Harness(defaultHeaders: headers)
        var own = TestRequest("/ok")
        own.headers = ["X-API-Key": "mine"]
        harness.send(TestRequest("/ok"))
        harness.send(own)
        let sent = harness.records("/ok").map(\.request)
        #expect(sent.map { $0.value(forHTTPHeaderField: "X-Api-Key") } == ["k1", "mine"])
        #expect(sent.map { $0.value(forHTTPHeaderField: "User-Agent") } == ["Shop/2.1", "Shop/2.1"])
        #expect(sent.allSatisfy { $0.value(forHTTPHeaderField: "Accept-Language") == nil })
        #expect(headers.fields.count == 2)
    }

    @Test func noneSendsNoDefaultHeader() {
        let harness = Harness(defaultHeaders: .none)
        harness.send(TestRequest("/ok"))
        let request = harness.records("/ok").first?.request
        #expect(request?.value(forHTTPHeaderField: "User-Agent") == nil)
        #expect(request?.value(forHTTPHeaderField: "Accept-Language") == nil)
    }

    @Test func aDefaultHeaderThatCouldInjectALineFailsTheRequestClearly() {
        let harness = Harness(defaultHeaders: APIEngine.DefaultHeaders(["X-Bad\r\nInjected": "yes"]))
        let task = harness.send(TestRequest("/ok"))
        #expect(task.state.name == "invalidRequest")
        #expect(harness.transport.records.isEmpty)
    }

    // The default headers are checked once, when the engine is made; a request's own when it is
    // built; what is added afterwards before the request goes. These are the later additions. On
    // Apple platforms the check refuses them; FoundationNetworking's `URLRequest` drops a value with
    // a line break when it is set, so on Linux the request goes without it: either way no line
    // reaches the wire.

    /// Whether any request the transport saw carries a header with a line break, or the line the
    /// value tried to inject.
    private static func anInjectedLineWasSent(_ transport: MockTransport) -> Bool {
        transport.records.contains { record in
            let fields = record.request.allHTTPHeaderFields ?? [:]
            return fields["X-Injected"] != nil
                || fields.contains { $0.key.contains(where: \.isNewline) || $0.value.contains(where: \.isNewline) }
        }
    }

    struct LineBreakingAuthenticator: APIAuthentication.Authenticator {
        func apply(_ credential: APIAuthentication.Credential, to request: inout URLRequest) {
            request.setValue(credential.accessToken, forHTTPHeaderField: "X-Session")
        }
        func isRefused(_ response: APIRawResponse, to request: URLRequest) -> Bool { false }
        func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
            credential
        }
    }

    @Test func aCredentialThatCouldInjectALineFailsTheRequestAndIsNeverSent() {
        let authentication = APIAuthentication(authenticator: LineBreakingAuthenticator(), clock: TestClock())
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "s1\r\nX-Injected: yes"))
        let harness = Harness(authentication: authentication)
        let task = harness.send(TestRequest("/ok"))
        #expect(!Self.anInjectedLineWasSent(harness.transport))
        #if canImport(Darwin)
        #expect(task.state.name == "invalidRequest")
        #expect(harness.transport.records.isEmpty)
        #endif
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func aPersistedHeaderThatCouldInjectALineFailsTheRequestAndIsNeverSent(scope: String?) async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json("{}"))
        let store = APIAuthentication.InMemoryCredentialStore()
        store.save(["access-token": "tok\r\nX-Injected: yes"], forOrigin: "https://api.test:443")
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                persistedHeaders: APIAuthentication.PersistedHeaders(store: store)))
        var request = TestRequest("/ok")
        request.concurrencyScope = scope
        var refusal: String?
        do {
            _ = try await manager.response(for: request)
        } catch {
            refusal = describe(error)
        }
        #expect(!Self.anInjectedLineWasSent(transport))
        #if canImport(Darwin)
        #expect(refusal?.hasPrefix("invalidRequest") == true, "\(String(describing: refusal))")
        #expect(transport.records.isEmpty)
        #endif
    }
}
