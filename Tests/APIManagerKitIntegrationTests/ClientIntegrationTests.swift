import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `APIClient` and `send(_:completion:)` over real sockets, on the transport under test: requests of
/// several endpoint types through one client, relative to its base URL.
@Suite(
    "Integration: one client for many endpoints", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct ClientIntegrationTests {
    struct Echo: APIResponse, Decodable {
        let args: [String: String]
    }

    struct Search: APIClient.Endpoint {
        typealias Response = Echo
        var query: String
        var path: String { "get" }
        var parameters: APIParameters { ["q": .string(query)] }
        var concurrencyPolicy: APIConcurrencyPolicy { .cancelOthers }
        var concurrencyScope: String? { "search" }
    }

    struct SlowSearch: APIClient.Endpoint {
        typealias Response = APIRawResponse
        var path: String { "delay/3" }
        var concurrencyPolicy: APIConcurrencyPolicy { .cancelOthers }
        var concurrencyScope: String? { "search" }
    }

    struct Posted: APIResponse, Decodable {
        let method: String
        let json: [String: Int]?
    }

    struct AddToCart: APIClient.Endpoint, Encodable {
        typealias Response = Posted
        let quantity: Int
        var path: String { "anything/cart" }
        var method: HTTPMethod { .post }
    }

    struct Unavailable: APIClient.Endpoint {
        typealias Response = APIRawResponse
        var path: String { "status/503" }
        var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 2, baseDelay: 0.05, jitter: .none) }
    }

    func makeClient() -> APIClient {
        var configuration = APIEngine.Configuration()
        configuration.transport = Shared.transport
        configuration.baseURL = Server.url
        configuration.delivery = .inline
        return APIClient(configuration: configuration)
    }

    @Test func requestsOfTwoTypesGetTheirTypedAnswersUnderTheBaseURL() async throws {
        let client = makeClient()
        let echo = try await client.response(for: Search(query: "kettle"))
        #expect(echo.args == ["q": "kettle"])
        let posted = try await client.response(for: AddToCart(quantity: 3))
        #expect(posted.method == "POST" && posted.json == ["quantity": 3])
    }

    @Test func aCompletionHearsARetriedFailureOnceWithItsStatus() async {
        let client = makeClient()
        let calls = Locked(0)
        var task: APITask<Unavailable>?
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<APIRawResponse, APIError>, Never>) in
            task = client.send(Unavailable()) { result in
                calls.withLock { $0 += 1 }
                continuation.resume(returning: result)
            }
        }
        guard case .failure(let error) = result else {
            Issue.record("a 503 was not a failure: \(result)")
            return
        }
        #expect(error.statusCode == 503)
        #expect(task?.attemptCount == 2, "retried once, then heard")
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func aSearchOfAnotherTypeReplacesTheSlowOneInItsScope() async {
        let client = makeClient()
        let slow = Locked<Result<APIRawResponse, APIError>?>(nil)
        client.send(SlowSearch()) { result in slow.withLock { $0 = result } }
        let latest = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Echo, APIError>, Never>) in
            client.send(Search(query: "kettle")) { continuation.resume(returning: $0) }
        }
        #expect((try? latest.get())?.args == ["q": "kettle"])
        guard case .failure(.cancelled(let reason)) = slow.withLock({ $0 }) else {
            Issue.record("the slow search was not cancelled: \(String(describing: slow.withLock { $0 }))")
            return
        }
        #expect(reason == .policy)
    }
}
