// Stubs that match what a request is (issue 45, item 1): method, scheme, host, port, a path with
// `{name}` segments, query items, headers and the body (bytes, JSON as values, form fields); first
// match wins, with a count or a sequence of answers; the unmatched error names them; the test can
// ask which went unused.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("MockTransport: stubs that match what a request is")
struct MockTransportMatchTests {
    private func request(
        _ method: String = "GET", _ url: String, headers: [String: String] = [:], body: String? = nil
    ) throws -> URLRequest {
        var request = URLRequest(url: try #require(URL(string: url)))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        return request
    }

    @Test func theURLsPartsTellRequestsWithOnePathApart() throws {
        let match = MockTransport.Match(.get, "/items", scheme: "https", host: "api.test", port: 8443)
        #expect(match.matches(try request("GET", "https://API.test:8443/items")))
        #expect(!match.matches(try request("GET", "http://api.test:8443/items")))
        #expect(!match.matches(try request("GET", "https://other.test:8443/items")))
        #expect(!match.matches(try request("GET", "https://api.test/items")))
        #expect(!match.matches(try request("POST", "https://api.test:8443/items")))
    }

    @Test(arguments: [
        ("/products/{id}", "/products/2", true), ("/products/{id}", "/products/2/reviews", false),
        ("/products/{id}", "/products/", false), ("/products/{id}/reviews", "/products/kettle/reviews", true),
        ("/products", "/products/", false), ("/{a}/{b}", "/x/y", true), ("/products/{}", "/products/{}", true),
    ])
    func aPathTemplateMatchesOneNonEmptySegmentPerName(template: String, path: String, matches: Bool) throws {
        #expect(MockTransport.Match(nil, template).matches(try request("GET", "https://api.test\(path)")) == matches)
    }

    @Test func queryItemsMatchIncludedOrExactlyDecoded() throws {
        let url = "https://api.test/search?q=swift%20book&page=2"
        #expect(MockTransport.Match(query: .including(["q": "swift book"])).matches(try request("GET", url)))
        #expect(!MockTransport.Match(query: .including(["q": "swift"])).matches(try request("GET", url)))
        #expect(
            MockTransport.Match(query: .exactly(["q": "swift book", "page": "2"])).matches(try request("GET", url)))
        #expect(!MockTransport.Match(query: .exactly(["q": "swift book"])).matches(try request("GET", url)))
        #expect(MockTransport.Match(query: .exactly([:])).matches(try request("GET", "https://api.test/search")))
        #expect(
            !MockTransport.Match(query: .exactly(["a": "1"])).matches(try request("GET", "https://api.test/s?a=1&a=1")))
    }

    @Test func headersMatchByNameWithoutCaseAndByValue() throws {
        let match = MockTransport.Match(headers: ["x-api-version": "2"])
        #expect(match.matches(try request("GET", "https://api.test/", headers: ["X-API-Version": "2"])))
        #expect(!match.matches(try request("GET", "https://api.test/", headers: ["X-API-Version": "3"])))
        #expect(!match.matches(try request("GET", "https://api.test/")))
    }

    @Test(arguments: [
        (#"{"sku":"A","quantity":1}"#, #"{ "quantity": 1.0, "sku": "A" }"#, true),
        (#"{"sku":"A","quantity":1}"#, #"{"sku":"A","quantity":2}"#, false),
        (#"{"on":true}"#, #"{"on":1}"#, false), (#"[1,2]"#, #"[2,1]"#, false), (#"{"a":null}"#, #"{"a":null}"#, true),
        (#"{"a":{"b":[1,"x"]}}"#, #"{"a":{"b":[1,"x"]}}"#, true), (#"{"a":1}"#, "not json", false),
    ])
    func aJSONBodyMatchesAsValues(wanted: String, sent: String, matches: Bool) throws {
        let match = MockTransport.Match(.post, body: .json(wanted))
        #expect(match.matches(try request("POST", "https://api.test/cart", body: sent)) == matches)
    }

    @Test func aFormBodyMatchesItsDecodedFieldsAndBytesMatchExactly() throws {
        let sent = try request("POST", "https://api.test/login", body: "user=ada+lovelace&note=a%26b&empty=")
        #expect(MockTransport.Match(body: .form(["user": "ada lovelace", "note": "a&b", "empty": ""])).matches(sent))
        #expect(!MockTransport.Match(body: .form(["user": "ada"])).matches(sent))
        #expect(MockTransport.Match(body: .bytes(Data("user=ada+lovelace&note=a%26b&empty=".utf8))).matches(sent))
        #expect(!MockTransport.Match(body: .bytes(Data())).matches(sent))
    }

    @Test func theFirstMatchAnswersUntilItsTimesAreUsedThenTheNextAndThePathStubsLast() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        transport.stub(nil, "/items", .json(#"{"value":"path stub"}"#))
        transport.stub(
            MockTransport.Match(.get, "/items"), times: 2, .json(#"{"value":"first"}"#), .json(#"{"value":"second"}"#))
        transport.stub(MockTransport.Match(.get, "/{what}"), .json(#"{"value":"template"}"#).after(0.5))
        var values: [String] = []
        for _ in 0..<3 {
            let task = manager.send(TestRequest("/items")) { result in values.append((try? result.get())?.value ?? "-")
            }
            if !task.state.isTerminal { clock.advance(by: 0.5) }
        }
        #expect(values == ["first", "second", "template"])
        #expect(transport.unusedStubs == ["any /items (answered 0 of 1)"], "the path stub never answered")
    }

    @Test func anUnmatchedRequestNamesTheMatchStubsAndUnusedOnesAreListed() throws {
        let transport = MockTransport()
        transport.stub(
            MockTransport.Match(.post, "/cart/{id}", host: "shop.test", query: .including(["lang": "en"])), times: 2,
            .status(201))
        let manager = TestManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/cart/2", method: .post))
        guard case .failed(.transport(let underlying)) = task.state,
            let unmatched = underlying as? MockTransport.UnmatchedRequest
        else {
            Issue.record("not failed as unmatched: \(task.state)")
            return
        }
        #expect(unmatched.stubs == ["POST /cart/{id} host shop.test query including [lang=en]"])
        #expect(transport.unusedStubs == ["POST /cart/{id} host shop.test query including [lang=en] (answered 0 of 2)"])
    }
}
