import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Retry")
struct RetryTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    // MARK: The pure delay table

    @Test func exponentialBackoffWithoutJitterDoublesUpToTheCap() {
        let policy = APIRetryPolicy(maxAttempts: 10, baseDelay: 0.5, maxDelay: 3, jitter: .none)
        let delays = (1...9).map {
            policy.delay(
                afterAttempt: $0, error: .unacceptableStatus(.init(statusCode: 500)), method: .get, randomUnit: 0.9,
                now: now)
        }
        #expect(delays == [0.5, 1, 2, 3, 3, 3, 3, 3, 3])
        #expect(
            policy.delay(
                afterAttempt: 10, error: .unacceptableStatus(.init(statusCode: 500)), method: .get, randomUnit: 0,
                now: now) == nil)
    }

    @Test func fullJitterScalesTheBackoffByTheRandomUnit() {
        let policy = APIRetryPolicy(maxAttempts: 5, baseDelay: 1, jitter: .full)
        let error = APIError.transport(underlying: URLError(.timedOut))
        #expect(policy.delay(afterAttempt: 3, error: error, method: .get, randomUnit: 0.25, now: now) == 1)
        #expect(policy.delay(afterAttempt: 3, error: error, method: .get, randomUnit: 0, now: now) == 0)
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retryableStatusesAreRetried(status: Int) {
        #expect(APIRetryPolicy().isRetryable(.unacceptableStatus(.init(statusCode: status)), method: .get))
    }

    @Test(arguments: [400, 401, 403, 404, 409, 422, 501])
    func otherStatusesAreNotRetried(status: Int) {
        #expect(!APIRetryPolicy().isRetryable(.unacceptableStatus(.init(statusCode: status)), method: .get))
    }

    @Test func transientTransportErrorsAreRetriedOthersAreNot() {
        let policy = APIRetryPolicy()
        #expect(policy.isRetryable(.transport(underlying: URLError(.networkConnectionLost)), method: .get))
        #expect(policy.isRetryable(.transport(underlying: URLError(.cannotConnectToHost)), method: .get))
        #expect(!policy.isRetryable(.transport(underlying: URLError(.badURL)), method: .get))
        #expect(!policy.isRetryable(.transport(underlying: URLError(.cancelled)), method: .get))
    }

    @Test func nonIdempotentMethodsAreRetriedOnlyWhenTheRequestOptsIn() {
        let error = APIError.unacceptableStatus(.init(statusCode: 503))
        #expect(!APIRetryPolicy().isRetryable(error, method: .post))
        #expect(!APIRetryPolicy().isRetryable(error, method: .patch))
        #expect(APIRetryPolicy().isRetryable(error, method: .put))
        #expect(APIRetryPolicy(retriesNonIdempotentRequests: true).isRetryable(error, method: .post))
    }

    @Test func cancellationIgnoreTimeoutAndDecodingAreNeverRetryable() {
        let policy = APIRetryPolicy()
        let response = APIRawResponse(statusCode: 200)
        for error: APIError in [
            .cancelled(reason: .explicit), .ignored, .timedOut(deadline: 1, attempts: 1),
            .decoding(underlying: URLError(.unknown), response: response),
        ] {
            #expect(!policy.isRetryable(error, method: .get))
        }
    }

    @Test func retryAfterInSecondsIsHonouredOn429And503() {
        let policy = APIRetryPolicy(baseDelay: 1, jitter: .none)
        let limited = APIRawResponse(statusCode: 429, headers: ["retry-after": "7"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(limited), method: .get, randomUnit: 0, now: now)
                == 7)
        let busy = APIRawResponse(statusCode: 503, headers: ["Retry-After": " 12 "])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(busy), method: .get, randomUnit: 0, now: now) == 12
        )
        // Ignored on other statuses.
        let broken = APIRawResponse(statusCode: 500, headers: ["Retry-After": "7"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(broken), method: .get, randomUnit: 0, now: now)
                == 1)
    }

    @Test func retryAfterAsAnHTTPDateIsCountedFromNow() {
        let policy = APIRetryPolicy(baseDelay: 1, jitter: .none)
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        let response = APIRawResponse(statusCode: 503, headers: ["Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(response), method: .get, randomUnit: 0, now: now)
                == 30)
        let past = APIRawResponse(statusCode: 503, headers: ["Retry-After": "Tue, 14 Nov 2023 22:00:00 GMT"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(past), method: .get, randomUnit: 0, now: now) == 0)
    }

    @Test func anUnreadableOrTooLongRetryAfterFallsBackOrGivesUp() {
        let policy = APIRetryPolicy(baseDelay: 1, jitter: .none, maxRetryAfter: 60)
        let garbage = APIRawResponse(statusCode: 503, headers: ["Retry-After": "soon"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(garbage), method: .get, randomUnit: 0, now: now)
                == 1)
        let tooLong = APIRawResponse(statusCode: 429, headers: ["Retry-After": "3600"])
        #expect(
            policy.delay(afterAttempt: 1, error: .unacceptableStatus(tooLong), method: .get, randomUnit: 0, now: now)
                == nil)
    }

    // MARK: Through the engine

    @Test func retryIsOffUnlessTheRequestAsks() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(503))
        let task = h.send(TestRequest("/flaky"))
        #expect(task.state.name == "status(503)")
        #expect(h.transport.records.count == 1)
    }

    @Test func aFailedAttemptIsRetriedAfterTheDelayTheHookReturns() {
        let h = Harness(random: 0.5)
        h.transport.stub(nil, "/flaky", .status(500), .status(502), .json(#"{"value":"third"}"#))
        let task = h.send(TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 2)))
        #expect(h.recorder.events(of: task) == ["start 1", "retry 1.0"])
        h.clock.advance(by: 0.999)
        #expect(task.attemptCount == 1)
        h.clock.advance(by: 0.001)
        #expect(task.attemptCount == 2)
        h.clock.advance(by: 2)
        #expect(task.state.name == "finished")
        #expect(h.recorder.events(of: task) == ["start 1", "retry 1.0", "start 2", "retry 2.0", "start 3", "finished"])
        #expect(h.transport.records.map(\.sentAt) == [0, 1, 3])
    }

    @Test func retryGivesUpAfterMaxAttemptsWithTheLastError() {
        let h = Harness()
        h.transport.stub(nil, "/down", .status(503))
        let task = h.send(TestRequest("/down", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        h.clock.advance(by: 10)
        #expect(task.state.name == "status(503)")
        #expect(task.attemptCount == 2)
        #expect(h.recorder.events(of: task).filter { $0.hasPrefix("failed") }.count == 1)
    }

    @Test func retryAfterFromTheServerDrivesTheRetry() {
        let h = Harness()
        h.transport.stub(nil, "/limited", .status(429, headers: ["Retry-After": "5"]), .json("{}"))
        let task = h.send(TestRequest("/limited", retry: .default))
        h.clock.advance(by: 4.9)
        #expect(task.attemptCount == 1)
        h.clock.advance(by: 0.1)
        #expect(task.state.name == "finished")
    }

    @Test func postIsNotRetriedUnlessThePolicyOptsIn() {
        let h = Harness()
        h.transport.stub(nil, "/order", .status(503), .json("{}"))
        let plain = h.send(TestRequest("/order", method: .post, retry: APIRetryPolicy(baseDelay: 1)))
        #expect(plain.state.name == "status(503)")
        let optedIn = h.send(
            TestRequest(
                "/order", method: .post, retry: APIRetryPolicy(baseDelay: 1, retriesNonIdempotentRequests: true)))
        h.clock.advance(by: 1)
        #expect(optedIn.state.name == "finished")
    }

    @Test func decodingFailuresAreNeverRetriedEvenWhenTheHookSaysSo() {
        let h = Harness()
        h.transport.stub(nil, "/garbage", .status(200, body: Data("not json".utf8)))
        let manager = AlwaysRetryManager(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/garbage"))
        #expect(task.state.name == "decoding")
        #expect(manager.askedAttempts.withLock { $0 } == [])
    }

    @Test func aCustomHookDecidesTheDelayForOtherFailures() {
        let h = Harness()
        h.transport.stub(nil, "/bad", .status(400), .json("{}"))
        let manager = AlwaysRetryManager(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/bad"))
        #expect(task.state.name == "waitingForRetry")
        h.clock.advance(by: 0.25)
        #expect(task.state.name == "finished")
        #expect(manager.askedAttempts.withLock { $0 } == [1])
    }

    @Test func cancellingDuringTheRetryDelayEndsTheTaskAtOnceAndForGood() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(503))
        let task = h.send(TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 100, baseDelay: 5, jitter: .none)))
        #expect(task.state.name == "waitingForRetry")
        task.cancel()
        #expect(task.state.name == "cancelled(explicit)")
        h.clock.advance(by: 1_000)
        #expect(h.transport.records.count == 1)
        #expect(h.clock.pendingTimerCount == 0)
        #expect(h.recorder.events(of: task) == ["start 1", "retry 5.0", "failed cancelled(explicit)"])
    }

    @Test func aLateCallbackFromAnOldAttemptIsDropped() {
        let h = Harness()
        let late = LateTransport()
        let engine = APIEngine(transport: late, clock: h.clock, delivery: .inline, execution: .inline)
        let manager = TestManager(engine: engine)
        manager.delegate = h.recorder
        let task = manager.send(TestRequest("/x", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none)))
        h.clock.advance(by: 1)  // attempt 2 starts
        #expect(task.attemptCount == 2)
        late.fire(attempt: 1, body: #"{"value":"stale"}"#)  // attempt 1 answers late: dropped
        #expect(task.state.name == "running")
        late.fire(attempt: 2, body: #"{"value":"fresh"}"#)
        #expect(task.state.name == "finished")
        #expect(h.recorder.events(of: task).filter { $0 == "finished" }.count == 1)
    }

    @Test func anOverallDeadlineEndsTheTaskAsTimedOutAcrossAttempts() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", MockTransport.Reply.status(503).after(1))
        let task = h.send(
            TestRequest(
                "/flaky", retry: APIRetryPolicy(maxAttempts: 10, baseDelay: 1, maxDelay: 1, jitter: .none),
                deadline: 4.5))
        h.clock.advance(by: 4.4)
        #expect(task.state.name != "timedOut")
        h.clock.advance(by: 0.1)
        #expect(task.state.name == "timedOut")
        guard case .failed(.timedOut(let deadline, let attempts)) = task.state else {
            Issue.record("expected a timeout, got \(task.state)")
            return
        }
        #expect(deadline == 4.5)
        #expect(attempts == 3)  // starts at 0, 2 and 4
        h.clock.advance(by: 100)
        #expect(h.transport.records.count == 3)
        #expect(h.transport.cancelledRequests.count == 1)
    }

    @Test func aTaskThatFinishesBeforeItsDeadlineLeavesNoTimerBehind() {
        let h = Harness()
        let task = h.send(TestRequest("/slow", deadline: 30))
        h.clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(h.clock.pendingTimerCount == 0)
    }
}

/// Retries every failure after 0.25 s and records which attempts it was asked about.
final class AlwaysRetryManager: APIManager {
    typealias Request = TestRequest
    typealias Response = Echo
    let engine: APIEngine
    let askedAttempts = Locked<[Int]>([])
    init(engine: APIEngine) { self.engine = engine }

    func retryDelay(for task: APITask<TestRequest>, afterAttempt attempt: Int, error: APIError) -> TimeInterval? {
        askedAttempts.withLock { $0.append(attempt) }
        return 0.25
    }
}

/// A transport whose attempts complete only when the test fires them, by attempt number; the first
/// attempt also fails at once with a retryable timeout, so its later success is a late callback.
final class LateTransport: APITransport, @unchecked Sendable {
    // @unchecked: `completions` is only touched under `lock`.
    private var completions: [@Sendable (Result<APIRawResponse, any Error>) -> Void] = []
    private let lock = NSLock()

    func send(_ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void)
        -> any APICancellable
    {
        let count = lock.withLock {
            completions.append(completion)
            return completions.count
        }
        if count == 1 { completion(.failure(URLError(.timedOut))) }
        return NoCancel()
    }

    func fire(attempt: Int, body: String) {
        let completion = lock.withLock { completions[attempt - 1] }
        completion(.success(APIRawResponse(statusCode: 200, body: Data(body.utf8))))
    }

    struct NoCancel: APICancellable { func cancel() {} }
}
