// The circuit breaker and the retry budget (issue 22, item 8): the per-origin value alone, event by
// event, then through a manager on a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

private let origin = "https://api.test:443"

@Suite("Circuit breaker and retry budget", .timeLimit(.minutes(1)))
struct CircuitBreakerTests {
    // MARK: The value alone

    private func opened(threshold: Int = 3, interval: Double = 10) -> Resilience {
        var resilience = Resilience(
            breaker: APIEngine.CircuitBreaker(failureThreshold: threshold, openInterval: interval), budget: nil)
        for task in 1...UInt64(threshold) {
            _ = resilience.admit(origin: origin, task: task, isFirstAttempt: true, now: 0)
            _ = resilience.record(origin: origin, task: task, transientFailure: true, now: 0)
        }
        return resilience
    }

    @Test func consecutiveTransientFailuresOpenTheCircuit() {
        var resilience = Resilience(
            breaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 10), budget: nil)
        var changes: [Resilience.Change?] = []
        for task in UInt64(1)...3 {
            #expect(resilience.admit(origin: origin, task: task, isFirstAttempt: true, now: 0) == .admitted)
            changes.append(resilience.record(origin: origin, task: task, transientFailure: true, now: 0))
        }
        #expect(changes == [nil, nil, .opened(closesIn: 10)])
        #expect(resilience.admit(origin: origin, task: 4, isFirstAttempt: true, now: 4) == .refused(closesIn: 6))
        #expect(
            resilience.admit(origin: "https://other.test:443", task: 5, isFirstAttempt: true, now: 4) == .admitted,
            "another origin has its own circuit")
    }

    @Test func anAnswerThatIsNotATransientFailureResetsTheCount() {
        var resilience = Resilience(breaker: APIEngine.CircuitBreaker(failureThreshold: 2), budget: nil)
        _ = resilience.admit(origin: origin, task: 1, isFirstAttempt: true, now: 0)
        _ = resilience.record(origin: origin, task: 1, transientFailure: true, now: 0)
        _ = resilience.record(origin: origin, task: 2, transientFailure: false, now: 0)
        #expect(resilience.record(origin: origin, task: 3, transientFailure: true, now: 0) == nil)
        #expect(resilience.circuit(of: origin) == .closed(failures: 1))
    }

    @Test func afterTheIntervalOneProbeGoesAndItsSuccessClosesTheCircuit() {
        var resilience = opened()
        #expect(resilience.admit(origin: origin, task: 10, isFirstAttempt: true, now: 10) == .probe)
        #expect(resilience.admit(origin: origin, task: 11, isFirstAttempt: true, now: 10) == .refused(closesIn: 0))
        #expect(resilience.record(origin: origin, task: 11, transientFailure: false, now: 10) == nil, "not the probe")
        #expect(resilience.record(origin: origin, task: 10, transientFailure: false, now: 11) == .closed)
        #expect(resilience.admit(origin: origin, task: 12, isFirstAttempt: true, now: 11) == .admitted)
    }

    @Test func aFailedProbeOpensTheCircuitAgain() {
        var resilience = opened()
        _ = resilience.admit(origin: origin, task: 10, isFirstAttempt: true, now: 10)
        #expect(resilience.record(origin: origin, task: 10, transientFailure: true, now: 12) == .opened(closesIn: 10))
        #expect(resilience.admit(origin: origin, task: 11, isFirstAttempt: true, now: 15) == .refused(closesIn: 7))
    }

    @Test func aProbeWhoseOutcomeNeverCameIsReplacedAfterAnotherInterval() {
        var resilience = opened()
        _ = resilience.admit(origin: origin, task: 10, isFirstAttempt: true, now: 10)  // then cancelled
        #expect(resilience.admit(origin: origin, task: 11, isFirstAttempt: true, now: 19) == .refused(closesIn: 0))
        #expect(resilience.admit(origin: origin, task: 11, isFirstAttempt: true, now: 20) == .probe)
    }

    @Test func aCancelledProbeLetsTheNextAttemptProbeAtOnce() {
        var resilience = opened()
        #expect(resilience.admit(origin: origin, task: 10, isFirstAttempt: true, now: 10) == .probe)
        resilience.abandon(origin: origin, task: 10, now: 11)
        #expect(resilience.circuit(of: origin) != .closed(failures: 0), "a cancellation is no evidence: not closed")
        #expect(resilience.admit(origin: origin, task: 11, isFirstAttempt: true, now: 11) == .probe)
        resilience.abandon(origin: origin, task: 10, now: 12)  // the old probe's late end changes nothing
        #expect(resilience.admit(origin: origin, task: 12, isFirstAttempt: true, now: 12) == .refused(closesIn: 0))
    }

    @Test func aCancelledAttemptLeavesTheFailureCountAsItWas() {
        var resilience = Resilience(
            breaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 10), budget: nil)
        for task in 1...2 as ClosedRange<UInt64> {
            _ = resilience.admit(origin: origin, task: task, isFirstAttempt: true, now: 0)
            _ = resilience.record(origin: origin, task: task, transientFailure: true, now: 0)
        }
        _ = resilience.admit(origin: origin, task: 3, isFirstAttempt: true, now: 0)
        resilience.abandon(origin: origin, task: 3, now: 0)
        #expect(resilience.circuit(of: origin) == .closed(failures: 2))
    }

    @Test func theRetryBudgetAllowsItsFloorThenItsShareOfRequests() {
        var resilience = Resilience(
            breaker: nil, budget: APIEngine.RetryBudget(ratio: 0.5, minimumRetries: 1, window: 10))
        _ = resilience.admit(origin: origin, task: 1, isFirstAttempt: true, now: 0)
        var allowed: [Bool] = []
        allowed.append(resilience.allowsRetry(origin: origin, now: 0))  // the floor
        allowed.append(resilience.allowsRetry(origin: origin, now: 0))  // 0.5 of one request is under two
        #expect(allowed == [true, false])
        for task in UInt64(2)...6 { _ = resilience.admit(origin: origin, task: task, isFirstAttempt: true, now: 1) }
        allowed = (0..<3).map { _ in resilience.allowsRetry(origin: origin, now: 1) }
        #expect(allowed == [true, true, false], "six requests allow three retries")
        let afterSliding = resilience.allowsRetry(origin: origin, now: 10.5)
        #expect(afterSliding, "the window slid past the first request and retry")
    }

    // MARK: Through a manager on a virtual clock

    private final class Monitor: @unchecked Sendable {
        // @unchecked: `lines` behind `lock`.
        private let lock = NSLock()
        private var lines: [String] = []
        func record(_ event: APIEvent) {
            let line: String? =
                switch event.kind {
                case .circuitOpened(_, let closesIn): "opened \(closesIn)"
                case .circuitClosed: "closed"
                case .retryRefused: "retry refused"
                case .started, .joined, .finished: nil
                }
            if let line { lock.withLock { lines.append(line) } }
        }
        var events: [String] { lock.withLock { lines } }
    }

    /// A manager with a circuit breaker (3 failures, 10 s) on a virtual clock, whose `/items` fails
    /// with `503` until `up` is set, then answers after `answerDelay` seconds; its event monitor.
    private func outage(answerDelay: Double = 0) -> (TestClock, MockTransport, Locked<Bool>, TestManager, Monitor) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let up = Locked(false)
        transport.stub(nil, "/items") { _ in
            up.withLock { $0 } ? .json(#"{"value":"ok"}"#).after(answerDelay) : .status(503)
        }
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 10)))
        let monitor = Monitor()
        manager.engine.eventMonitor = { monitor.record($0) }
        return (clock, transport, up, manager, monitor)
    }

    @Test func anOutageOpensTheCircuitThenAProbeClosesIt() {
        let (clock, transport, up, manager, monitor) = outage()
        let failures = (0..<3).map { _ in manager.send(TestRequest("/items")) }
        #expect(failures.allSatisfy { $0.state.name == "status(503)" })
        #expect(monitor.events == ["opened 10.0"])
        clock.advance(by: 4)
        let refused = manager.send(TestRequest("/items"))
        #expect(refused.state.name == "circuitOpen(https://api.test:443, 6.0)")
        #expect(transport.records.count == 3, "refused at once, not sent")
        up.withLock { $0 = true }
        clock.advance(by: 6)
        let probe = manager.send(TestRequest("/items"))
        #expect(probe.state.name == "finished")
        #expect(monitor.events == ["opened 10.0", "closed"])
        #expect(manager.send(TestRequest("/items")).state.name == "finished")
    }

    /// A probe cancelled while it waits for its answer: the circuit does not close on it (nothing was
    /// learnt), and the next request probes at once instead of being refused for another interval.
    @Test(arguments: [nil, "items"] as [String?])
    func aCancelledProbeNeitherClosesTheCircuitNorKeepsItShut(scope: String?) throws {
        let (clock, _, up, manager, monitor) = outage(answerDelay: 1)
        var request = TestRequest("/items")
        request.concurrencyScope = scope
        for _ in 0..<3 { manager.send(request) }
        up.withLock { $0 = true }
        clock.advance(by: 10)
        let probe = manager.send(request)
        #expect(probe.state.name == "running")
        let refused = manager.send(request)
        #expect(refused.state.name == "circuitOpen(https://api.test:443, 0.0)", "one probe at a time")
        probe.cancel()
        #expect(monitor.events == ["opened 10.0"], "the cancelled probe closed nothing")
        let next = manager.send(request)
        #expect(next.state.name == "running", "the next request is the probe, at once")
        clock.advance(by: 1)
        #expect(next.state.name == "finished")
        #expect(monitor.events == ["opened 10.0", "closed"])
    }

    /// Cancels a task while its request is built (its `urlRequest(for:)`), when the request asks.
    final class CancellingManager: APIManager {
        typealias Request = TestRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }

        func urlRequest(for task: APITask<TestRequest>) throws -> URLRequest {
            if task.request.headers["X-Cancel-While-Built"] != nil { task.cancel() }
            return try task.request.makeURLRequest()
        }
    }

    /// The probe's task ends while its request is built: it is admitted as the probe, then never
    /// sent. The next request probes at once instead of being refused for another interval.
    @Test(arguments: [nil, "items"] as [String?])
    func aProbeCancelledWhileItsRequestIsBuiltLetsTheNextAttemptProbe(scope: String?) throws {
        let (clock, transport, up, manager, monitor) = outage(answerDelay: 1)
        let canceller = CancellingManager(engine: manager.engine)  // the same engine, so the same circuit
        var request = TestRequest("/items")
        request.concurrencyScope = scope
        for _ in 0..<3 { manager.send(request) }
        up.withLock { $0 = true }
        clock.advance(by: 10)
        var cancelled = request
        cancelled.headers["X-Cancel-While-Built"] = "1"
        let probe = canceller.send(cancelled)
        #expect(probe.state.name == "cancelled(explicit)")
        #expect(transport.records.count == 3, "never sent")
        let next = manager.send(request)
        #expect(next.state.name == "running", "the next request is the probe, at once")
        clock.advance(by: 1)
        #expect(next.state.name == "finished")
        #expect(monitor.events == ["opened 10.0", "closed"])
    }

    @Test func retriesPastTheBudgetEndTheTaskWithItsError() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", .status(503))
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 1, window: 60)))
        let monitor = Monitor()
        manager.engine.eventMonitor = { monitor.record($0) }
        let retry = APIRetryPolicy(maxAttempts: 5, baseDelay: 1, jitter: .none)
        let task = manager.send(TestRequest("/flaky", retry: retry))
        clock.advance(by: 1)
        #expect(task.attemptCount == 2, "the one retry the budget allows")
        #expect(task.state.name == "status(503)", "the second retry is refused: the task ends with its error")
        #expect(monitor.events == ["retry refused"])
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func withoutThemNothingChanges() {
        let transport = MockTransport()
        transport.stub(nil, "/items", .status(503))
        let manager = TestManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        for _ in 0..<20 { manager.send(TestRequest("/items")) }
        #expect(transport.records.count == 20)
    }

    // MARK: A shared attempt counts once (the corrections issue, item 21)

    @Test(arguments: [nil, "items"] as [String?])
    func oneSharedFailureCountsOnceHoweverManySendersShareIt(scope: String?) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items", MockTransport.Reply.status(503).after(1))
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 10)))
        let monitor = Monitor()
        manager.engine.eventMonitor = { monitor.record($0) }
        var request = TestRequest("/items")
        request.sharing = .always
        request.concurrencyScope = scope
        let senders = (0..<3).map { _ in manager.send(request) }
        clock.advance(by: 1)
        #expect(transport.records.count == 1, "one network attempt")
        #expect(senders.allSatisfy { $0.state.name == "status(503)" })
        #expect(monitor.events.isEmpty, "one failure of three: the circuit stays closed")
        // Two more failures of their own open it, as three in a row should.
        request.sharing = .never
        manager.send(request)
        manager.send(request)
        clock.advance(by: 1)
        #expect(monitor.events == ["opened 10.0"])
    }

    @Test func oneSharedRetryIsCountedOnceByTheBudget() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", MockTransport.Reply.status(503).after(1), .json(#"{"value":"ok"}"#).after(1))
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline,
                retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 1, window: 60)))
        let monitor = Monitor()
        manager.engine.eventMonitor = { monitor.record($0) }
        var request = TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none))
        request.sharing = .always
        let senders = (0..<3).map { _ in manager.send(request) }
        clock.advance(by: 1)
        clock.advance(by: 1)
        clock.advance(by: 1)
        #expect(monitor.events.isEmpty, "the budget's one retry covers the shared retry: none refused")
        #expect(senders.allSatisfy { $0.state.name == "finished" })
        #expect(transport.records.count == 2, "one attempt, one shared retry")
    }
}
