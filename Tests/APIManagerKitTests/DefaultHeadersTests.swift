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
}
