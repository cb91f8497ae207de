import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request whose timeout and body limit are set by the test.
struct LimitedRequest: APIRequest {
    var url = testBaseURL
    var path = "/ok"
    var timeout: TimeInterval = 60
    var totalTimeout: TimeInterval?
    var maxResponseBodySize: Int? = APIRequestDefaults.maxResponseBodySize
    var retryPolicy: APIRetryPolicy? = APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none)
}

final class LimitedManager: APIManager {
    typealias Request = LimitedRequest
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// Attempt timeouts, the response body limit, and cache hits timed on the cache's clock.
@Suite("Timeouts, body limits and the cache's clock")
struct TimeoutsAndBodyLimitsTests {
    private func limited() -> (LimitedManager, MockTransport, EventRecorder) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let recorder = EventRecorder()
        let manager = LimitedManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        manager.delegate = recorder
        return (manager, transport, recorder)
    }

    @Test(arguments: [0, -1, Double.nan, .infinity, -.infinity])
    func aTimeoutThatIsNotPositiveAndFiniteIsAnInvalidRequestAndNothingIsSent(timeout: Double) {
        let (manager, transport, _) = limited()
        transport.stub(nil, "/ok", .json("{}"))
        let task = manager.send(LimitedRequest(timeout: timeout))
        #expect(task.state.name == "invalidRequest")
        #expect(transport.records.isEmpty)
    }

    @Test(arguments: [0, -1, Double.nan, .infinity, -.infinity])
    func aTotalTimeoutThatIsNotPositiveAndFiniteIsAnInvalidRequestAndNothingIsSent(total: Double) {
        let (manager, transport, _) = limited()
        transport.stub(nil, "/ok", .json("{}"))
        let task = manager.send(LimitedRequest(totalTimeout: total))
        #expect(task.state.name == "invalidRequest")
        #expect(transport.records.isEmpty)
    }

    /// The corrections issue, item 11: `1e300` meant "no limit" (it overflowed the transports'
    /// clocks); it is clamped to the documented maximum.
    @Test(arguments: [1e300, Double.greatestFiniteMagnitude, 31_536_001])
    func anAbsurdFiniteTimeoutCountsAsTheMaximum(seconds: Double) throws {
        let (manager, transport, _) = limited()
        transport.stub(nil, "/ok", .json("{}"))
        let task = manager.send(LimitedRequest(timeout: seconds, totalTimeout: seconds))
        #expect(task.state.name == "finished")
        let sent = try #require(transport.records.first)
        #expect(sent.request.timeoutInterval == APIRequestDefaults.maxTimeout)
        #expect(sent.options.totalTimeout == APIRequestDefaults.maxTimeout)
        #expect(APIRequestDefaults.maxTimeout == 31_536_000)
    }

    @Test func theTimeoutIsSentAsTheIdleLimitAndTheTotalAsAnOption() throws {
        let (manager, transport, _) = limited()
        transport.stub(nil, "/ok", .json("{}"))
        manager.send(LimitedRequest(timeout: 7, totalTimeout: 90))
        manager.send(LimitedRequest())
        let records = transport.records
        #expect(records.map(\.request.timeoutInterval) == [7, 60])
        #expect(records.map(\.options.totalTimeout) == [90, nil], "no total limit unless asked")
    }

    @Test func aBodyPastTheLimitFromATransportThatDoesNotEnforceItFailsAndIsNotRetried() {
        let (manager, transport, recorder) = limited()
        transport.stub(nil, "/ok", .status(200, body: Data(count: 1_001)))
        let task = manager.send(LimitedRequest(maxResponseBodySize: 1_000))
        #expect(task.state.name == "responseTooLarge(1000)")
        #expect(recorder.events(of: task) == ["start 1", "failed responseTooLarge(1000)"])
        let exact = manager.send(LimitedRequest(maxResponseBodySize: 1_001))
        #expect(exact.state.name == "finished")
        let unlimited = manager.send(LimitedRequest(maxResponseBodySize: nil))
        #expect(unlimited.state.name == "finished")
    }

    @Test func theDefaultBodyLimitIs64MiB() {
        #expect(LimitedRequest().maxResponseBodySize == 64 << 20)
        #expect(TestRequest("/x").maxResponseBodySize == 64 << 20)
    }

    /// The retry hook's answer: negative finite counts as 0; any infinite (either sign) or NaN gives up.
    @Test(arguments: [
        (-5.0, "retry 0.0"), (-Double.infinity, "failed status(503)"), (Double.infinity, "failed status(503)"),
        (Double.nan, "failed status(503)"),
    ])
    func theRetryHooksDelayIsClampedOrGivesUp(delay: Double, expected: String) {
        final class Hooked: APIManager {
            typealias Request = TestRequest
            typealias Response = Echo
            let engine: APIEngine
            let delay: Double
            init(engine: APIEngine, delay: Double) {
                self.engine = engine
                self.delay = delay
            }
            func retryDelay(for task: APITask<TestRequest>, afterAttempt attempt: Int, error: APIError)
                -> TimeInterval?
            { attempt == 1 ? delay : nil }
        }
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(503))
        let manager = Hooked(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline),
            delay: delay)
        manager.delegate = h.recorder
        let task = manager.send(TestRequest("/flaky"))
        #expect(h.recorder.events(of: task).dropFirst().first == expected)
    }

    /// A `.cacheOnly` hit counts as attempt 1: the attempt is the engine's work on the task, a
    /// cache lookup included, even though nothing is sent.
    @Test func aCacheOnlyHitIsAttemptOneWithNothingSent() {
        let h = CacheHarness()
        h.transport.stub(nil, "/profile", .json(#"{"value":"stored"}"#))
        h.send("/profile", .networkOnly)
        let hit = h.send("/profile", .cacheOnly)
        #expect(hit.attemptCount == 1)
        #expect(hit.responseSource == .cache)
        #expect(h.recorder.events(of: hit) == ["start 1", "finished"])
        #expect(h.transport.records.count == 1)
    }

    /// `.fresh(maxAge:)` measures age on the cache's clock (a cache may serve several engines), so
    /// a test on a virtual clock gives that clock to the cache too.
    @Test func freshMeasuresAgeOnTheCachesClock() {
        let h = CacheHarness()  // engine and cache share h.clock
        h.transport.stub(nil, "/feed", .json(#"{"value":"v"}"#))
        h.send("/feed", .networkOnly)
        #expect(h.send("/feed", .fresh(maxAge: 60)).responseSource == .cache)
        h.clock.advance(by: 61)
        #expect(h.send("/feed", .fresh(maxAge: 60)).responseSource == .network)

        // A cache on its own clock: moving only the engine's clock does not age its entries.
        let cacheClock = TestClock()
        let engineClock = TestClock()
        let transport = MockTransport(clock: engineClock)
        transport.stub(nil, "/feed", .json(#"{"value":"v"}"#))
        let cache = APIResponseCache(disk: nil, clock: cacheClock)
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: engineClock, delivery: .inline, execution: .inline, cache: cache))
        var request = TestRequest("/feed")
        manager.send(request)
        engineClock.advance(by: 3_600)
        request.cacheOption = .fresh(maxAge: 60)
        #expect(manager.send(request).responseSource == .cache)
        cacheClock.advance(by: 61)
        #expect(manager.send(request).responseSource == .network)
    }
}
