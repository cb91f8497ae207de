// The circuit breaker's and the retry budget's events reach the engine's observers as notices
// (issue 42, item 5: they used to reach only the event monitor), on the attempt's thread, each time.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("Observers hear the circuit breaker and the retry budget", .timeLimit(.minutes(1)))
struct ResilienceNoticeTests {
    @Test(arguments: [nil, "items"] as [String?])
    func anOutageOpensTheCircuitThenAProbeClosesIt(scope: String?) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let up = Locked(false)
        transport.stub(nil, "/items") { _ in up.withLock { $0 } ? .json(#"{"value":"ok"}"#) : .status(503) }
        let recorder = NoticeRecorder()
        let manager = TestManager(
            engine: observedEngine(
                [recorder], transport: transport, clock: clock,
                circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 10)))
        var request = TestRequest("/items")
        request.concurrencyScope = scope
        let failures = (0..<3).map { _ in manager.send(request) }
        let opened = recorder.notices.withLock { $0 }
        #expect(opened.map(\.kind) == [.circuitOpened])
        #expect(opened.first?.origin == "https://api.test:443")
        #expect(opened.first?.closesIn == 10)
        #expect(opened.first?.task === failures.last, "the attempt whose failure opened it")
        #expect(opened.first?.attempt == 1)
        #expect(opened.first?.description == "circuit of https://api.test:443 opened for 10.0 s (task 3, attempt 1)")
        up.withLock { $0 = true }
        clock.advance(by: 10)
        let probe = manager.send(request)
        #expect(probe.state.name == "finished")
        let all = recorder.notices.withLock { $0 }
        #expect(all.map(\.kind) == [.circuitOpened, .circuitClosed])
        #expect(all.last?.task === probe)
        #expect(all.last?.origin == "https://api.test:443")
    }

    @Test func aRetryTheBudgetRefusesIsANoticeWithItsError() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", .status(503))
        let recorder = NoticeRecorder()
        let manager = TestManager(
            engine: observedEngine(
                [recorder], transport: transport, clock: clock,
                retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 1, window: 60)))
        let task = manager.send(
            TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 5, baseDelay: 1, jitter: .none)))
        clock.advance(by: 1)
        #expect(task.state.name == "status(503)")
        let notices = recorder.notices.withLock { $0 }
        #expect(notices.map(\.kind) == [.retryRefused])
        #expect(notices.first?.task === task)
        #expect(notices.first?.attempt == 2)
        #expect(notices.first?.error.map { "\($0)" }?.contains("503") == true)
    }

    @Test func theLogObserverWritesAnOpenedCircuitAsAWarningAndAClosedOneAsInfo() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let up = Locked(false)
        transport.stub(nil, "/items") { _ in up.withLock { $0 } ? .json(#"{"value":"ok"}"#) : .status(503) }
        let lines = Locked<[(APIEngine.LogObserver.Level, String)]>([])
        let log = APIEngine.LogObserver(minimumLevel: .info) { level, line in
            lines.withLock { $0.append((level, line)) }
        }
        let manager = TestManager(
            engine: observedEngine(
                [log], transport: transport, clock: clock,
                circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 1, openInterval: 5)))
        manager.send(TestRequest("/items"))
        up.withLock { $0 = true }
        clock.advance(by: 5)
        manager.send(TestRequest("/items"))
        let circuit = lines.withLock { $0 }.filter { $0.1.contains("circuit of") }
        #expect(circuit.map(\.0) == [.warning, .info])
    }

    @Test func aRefusedRetrysNoticeSaysTheErrorWithoutWhatTheServerWrote() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", .json(#"{"message":"token s3cr3t-echo is not valid"}"#, status: 503))
        let recorder = NoticeRecorder()
        let lines = Locked<[String]>([])
        let log = APIEngine.LogObserver { _, line in lines.withLock { $0.append(line) } }
        let manager = TestManager(
            engine: observedEngine(
                [recorder, log], transport: transport, clock: clock,
                retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 0, window: 60)))
        let task = manager.send(
            TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none)))
        #expect(task.state.name == "status(503)")
        let notice = recorder.notices.withLock { $0.first }
        #expect(notice?.kind == .retryRefused)
        #expect(notice?.description == "retry refused by the retry budget after status 503 (task 1, attempt 1)")
        #expect(!lines.withLock { $0.joined(separator: "\n") }.contains("s3cr3t"))
    }
}
