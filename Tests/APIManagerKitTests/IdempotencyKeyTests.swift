import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Idempotency-Key`: one value per task, on every attempt, retry and authentication replay.
@Suite("Idempotency keys")
struct IdempotencyKeyTests {
    private func order(key: APIIdempotencyKey? = .standard) -> TestRequest {
        var request = TestRequest(
            "/order", method: .post,
            retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none, retriesNonIdempotentRequests: true))
        request.idempotencyKey = key
        return request
    }

    @Test func everyRetryOfATaskCarriesTheSameKeyAndAnotherTaskAnother() {
        let h = Harness()
        h.transport.stub(nil, "/order", .status(503), .status(503), .json("{}"), .json("{}"))
        let first = h.send(order())
        h.clock.advance(by: 1)
        h.clock.advance(by: 2)
        #expect(first.state.name == "finished")
        let second = h.send(order())
        let keys = h.records("/order").map { $0.request.value(forHTTPHeaderField: "Idempotency-Key") }
        #expect(keys.count == 4)
        #expect(keys[0] != nil && keys[0] == keys[1] && keys[1] == keys[2])
        #expect(keys[0] == first.idempotencyKey)
        #expect(keys[3] != nil && keys[3] != keys[0] && keys[3] == second.idempotencyKey)
    }

    @Test func theHeaderNameAndGeneratorAreSettable() {
        let h = Harness()
        h.transport.stub(nil, "/order", .status(503), .json("{}"))
        let counter = Locked(0)
        let key = APIIdempotencyKey(headerName: "X-Request-Once") {
            counter.withLock {
                $0 += 1
                return "op-\($0)"
            }
        }
        let task = h.send(order(key: key))
        h.clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(h.records("/order").map { $0.request.value(forHTTPHeaderField: "X-Request-Once") } == ["op-1", "op-1"])
        #expect(h.records("/order").allSatisfy { $0.request.value(forHTTPHeaderField: "Idempotency-Key") == nil })
        #expect(counter.withLock { $0 } == 1)
    }

    @Test func withoutTheDeclarationNoHeaderIsSentAndAnExplicitHeaderWins() {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"))
        let plain = h.send(order(key: nil))
        #expect(plain.idempotencyKey == nil)
        var explicit = order()
        explicit.headers = ["Idempotency-Key": "mine"]
        h.send(explicit)
        let keys = h.records("/order").map { $0.request.value(forHTTPHeaderField: "Idempotency-Key") }
        #expect(keys == [nil, "mine"])
    }

    @Test func anAuthenticationReplayCarriesTheSameKey() {
        let auth = AuthHarness(authenticator: MockAuthenticator())
        var request = TestRequest("/me", method: .post)
        request.idempotencyKey = .standard
        let task = auth.send(request)
        #expect(task.state.name == "finished")
        #expect(auth.sentTokens == ["expired", "token-1"])
        let keys = auth.harness.records("/me").map { $0.request.value(forHTTPHeaderField: "Idempotency-Key") }
        #expect(keys.count == 2 && keys[0] != nil && keys[0] == keys[1] && keys[0] == task.idempotencyKey)
    }

    /// The corrections issue, item 17: refused with the typed error every other header gets, not
    /// dropped (URLRequest on Linux drops a value with CR or LF).
    @Test(arguments: ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\u{0}b"])
    func aGeneratedKeyThatCouldSplitTheHeaderIsRefusedBeforeSending(value: String) {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"))
        let task = h.send(order(key: APIIdempotencyKey { value }))
        #expect(task.state.name == "invalidRequest")
        #expect(h.records("/order").isEmpty, "nothing sent without its key")
    }

    /// Item 18: the key the task reports is the one on the wire.
    @Test func theTaskReportsTheKeyOnTheWireWhenTheRequestSetsItsOwn() {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"), .json("{}"))
        var explicit = order()
        explicit.headers = ["idempotency-key": "mine"]
        let task = h.send(explicit)
        #expect(task.idempotencyKey == "mine")
        #expect(h.records("/order").last?.request.value(forHTTPHeaderField: "Idempotency-Key") == "mine")
    }

    struct ConfiguredOrder: APIRequest {
        var url = testBaseURL
        var path = "/order"
        var method: HTTPMethod { .post }
        var idempotencyKey: APIIdempotencyKey? { .standard }
        func configure(_ urlRequest: inout URLRequest) throws {
            urlRequest.setValue("from-configure", forHTTPHeaderField: "Idempotency-Key")
        }
    }

    final class Orders: APIManager {
        typealias Request = ConfiguredOrder
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func theTaskReportsTheKeyAConfigureHookSet() {
        let transport = MockTransport()
        transport.stub(nil, "/order", .json("{}"))
        let orders = Orders(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = orders.send(ConfiguredOrder())
        #expect(transport.records.last?.request.value(forHTTPHeaderField: "Idempotency-Key") == "from-configure")
        #expect(task.idempotencyKey == "from-configure")
    }

    /// Item 19: draft-ietf-httpapi-idempotency-key-header writes the field as an sf-string.
    @Test(arguments: [
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", #""8e03978e-40d5-43e8-bc93-6894a57f9324""#),
        (#"a"b\c"#, #""a\"b\\c""#), ("", #""""#),
    ])
    func theDraftFormatIsAQuotedStructuredFieldString(generated: String, onTheWire: String) {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"))
        let task = h.send(order(key: APIIdempotencyKey(format: .structuredFieldString) { generated }))
        #expect(h.records("/order").last?.request.value(forHTTPHeaderField: "Idempotency-Key") == onTheWire)
        #expect(task.idempotencyKey == onTheWire)
    }

    @Test func theDraftKeyIsAQuotedUUIDAndTheStandardOneIsBare() {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"), .json("{}"))
        h.send(order(key: .draft))
        h.send(order(key: .standard))
        let keys = h.records("/order").compactMap { $0.request.value(forHTTPHeaderField: "Idempotency-Key") }
        #expect(keys.count == 2)
        #expect(
            keys[0].hasPrefix("\"") && keys[0].hasSuffix("\"")
                && UUID(uuidString: String(keys[0].dropFirst().dropLast())) != nil)
        #expect(UUID(uuidString: keys[1]) != nil)
    }

    @Test func aKeyThatCannotBeAStructuredFieldStringIsRefused() {
        let h = Harness()
        h.transport.stub(nil, "/order", .json("{}"))
        let task = h.send(order(key: APIIdempotencyKey(format: .structuredFieldString) { "clé" }))
        #expect(task.state.name == "invalidRequest")
        #expect(h.records("/order").isEmpty)
    }
}
