import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

/// The seed's envelope: `{"code": 0, "message": "ok", "result": {...}}`.
struct WeatherResponse: APIEnvelopeResponse {
    struct ServerError: Error, Equatable {
        let code: Int
        let message: String
    }
    let city: String

    init(code: Int, message: String, result: Any?) throws {
        guard code == 0 else { throw ServerError(code: code, message: message) }
        guard let result = result as? [String: Any], let city = result["city"] as? String else {
            throw APIEnvelopeError("missing result.city")
        }
        self.city = city
    }
}

final class WeatherAPI: APIManager {
    typealias Request = TestRequest
    typealias Response = WeatherResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

@Suite("Responses")
struct ResponseTests {
    func send(_ reply: MockTransport.Reply) -> AnyAPITask.State {
        let h = Harness()
        h.transport.stub(nil, "/weather", reply)
        let api = WeatherAPI(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        return api.send(TestRequest("/weather")).state
    }

    @Test func anEnvelopeWithCodeZeroBuildsTheResponse() async throws {
        let h = Harness()
        h.transport.stub(nil, "/weather", .json(#"{"code":0,"message":"ok","result":{"city":"Lisbon"}}"#))
        let api = WeatherAPI(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let weather = try await api.response(for: TestRequest("/weather"))
        #expect(weather.city == "Lisbon")
    }

    @Test func anEnvelopeThatItsInitializerRejectsFailsAsRejected() {
        guard case .failed(.rejected(let error, let response)) = send(.json(#"{"code":42,"message":"no such city"}"#))
        else {
            Issue.record("expected rejected")
            return
        }
        #expect(error as? WeatherResponse.ServerError == .init(code: 42, message: "no such city"))
        #expect(response.statusCode == 200)
    }

    @Test(arguments: ["", "not json", "[1,2]", #"{"message":"no code"}"#, #"{"code":"zero"}"#, "null"])
    func malformedEnvelopesFailAsDecodingErrorsWithoutCrashing(body: String) {
        #expect(send(.status(200, body: Data(body.utf8))).name == "decoding")
    }

    @Test func aDecodableResponseAcceptsAnEmptyBody() {
        let h = Harness()
        h.transport.stub(nil, "/empty", .status(204))
        #expect(h.send(TestRequest("/empty")).state.name == "finished")
    }

    @Test func anUnacceptableStatusKeepsStatusHeadersAndBody() {
        guard
            case .failed(let error) = send(
                .status(418, headers: ["X-Teapot": "yes"], body: Data("short and stout".utf8)))
        else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.statusCode == 418)
        #expect(error.response?.value(forHeader: "x-teapot") == "yes")
        #expect(error.responseBody == Data("short and stout".utf8))
        #expect(error.localizedDescription.contains("418"))
    }

    @Test func aTransportErrorKeepsTheURLError() {
        guard case .failed(let error) = send(.failure(.notConnectedToInternet)) else {
            Issue.record("expected a failure")
            return
        }
        #expect((error.underlyingError as? URLError)?.code == .notConnectedToInternet)
    }

    @Test func requestsResolvePathsAgainstTheirURL() throws {
        struct R: APIRequest {
            var url: URL
            var path: String
        }
        let base = URL(string: "https://x.test/api")!
        #expect(try R(url: base, path: "cart/items").resolvedURL().absoluteString == "https://x.test/api/cart/items")
        #expect(
            try R(url: URL(string: "https://x.test/api/")!, path: "/cart").resolvedURL().absoluteString
                == "https://x.test/api/cart")
        #expect(try R(url: base, path: "a b").resolvedURL().absoluteString == "https://x.test/api/a%20b")
        #expect(try R(url: base, path: "").resolvedURL() == base)
    }

    @Test func aRequestThatOnlyNamesItsURLWorks() throws {
        struct Ping: APIRequest { let url = URL(string: "https://x.test/ping")! }
        let request = try Ping().makeURLRequest()
        #expect(request.httpMethod == "GET")
        #expect(request.url?.absoluteString == "https://x.test/ping")
        #expect(request.timeoutInterval == 60)
        #expect(Ping().concurrencyPolicy == .default)
        #expect(Ping().retryPolicy == nil)
    }

    @Test func aJSONBodySetsItsContentType() throws {
        struct Add: APIRequest {
            let url = URL(string: "https://x.test/cart")!
            var method: HTTPMethod { .post }
            var body: APIRequestBody? { try? .json(["sku": "42"]) }
        }
        let request = try Add().makeURLRequest()
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(request.httpBody == Data(#"{"sku":"42"}"#.utf8))
    }
}
