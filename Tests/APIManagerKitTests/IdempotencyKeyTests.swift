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
}
