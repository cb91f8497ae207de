// `eventMonitor` is a shorthand that installs an observer (issue 42, item 5): one way events leave
// the engine. The monitor hears what it always heard, after the engine's observers, from the
// attempts that begin once it is set.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Writes what it is told of each attempt, and its notices, into a timeline shared with a monitor.
private struct TimelineObserver: APIEngine.Observer {
    let timeline: Locked<[String]>
    func observe(_ observation: APIEngine.Observation) {
        switch observation.kind {
        case .started(let attempt): timeline.withLock { $0.append("observer started \(attempt)") }
        case .attemptSent(let attempt, _, let shared):
            timeline.withLock { $0.append("observer sent \(attempt)" + (shared.map { " with \($0)" } ?? "")) }
        case .attemptEnded(let report):
            timeline.withLock { $0.append("observer ended \(report.attempt) \(report.statusCode ?? 0)") }
        default: break
        }
    }
    func notice(_ notice: APIEngine.Notice) { timeline.withLock { $0.append("observer \(notice.kind)") } }
}

private func line(of event: APIEvent) -> String {
    switch event.kind {
    case .started: return "monitor started \(event.attempt)"
    case .joined(let leader): return "monitor joined \(event.attempt) with \(leader)"
    case .finished(.success(let raw)): return "monitor finished \(event.attempt) \(raw.statusCode)"
    case .finished(.failure): return "monitor failed \(event.attempt)" + (event.request == nil ? " unsent" : "")
    case .circuitOpened: return "monitor circuitOpened"
    case .circuitClosed: return "monitor circuitClosed"
    case .retryRefused: return "monitor retryRefused"
    }
}

@Suite("The event monitor is an observer the engine installs", .timeLimit(.minutes(1)))
struct EventMonitorForwardTests {
    @Test(arguments: [nil, "items"] as [String?])
    func theMonitorHearsEachAttemptAfterTheEnginesObservers(scope: String?) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", MockTransport.Reply.status(503).after(1), MockTransport.Reply.json("{}").after(2))
        let timeline = Locked<[String]>([])
        let engine = observedEngine([TimelineObserver(timeline: timeline)], transport: transport, clock: clock)
        engine.eventMonitor = { event in timeline.withLock { $0.append(line(of: event)) } }
        var request = TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 0.5, jitter: .none))
        request.concurrencyScope = scope
        let manager = TestManager(engine: engine)
        manager.send(request)
        clock.runUntilIdle()
        #expect(
            timeline.withLock { $0 } == [
                "observer started 1", "observer sent 1", "monitor started 1", "observer ended 1 503",
                "monitor finished 1 503", "observer started 2", "observer sent 2", "monitor started 2",
                "observer ended 2 200", "monitor finished 2 200",
            ])
    }

    @Test func aMonitorSetAloneHearsAttemptsAndAResetStopsIt() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items", .json("{}"))
        let engine = APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline)
        #expect(engine.eventMonitor == nil)
        let seen = Locked<[String]>([])
        engine.eventMonitor = { event in seen.withLock { $0.append(line(of: event)) } }
        #expect(engine.eventMonitor != nil)
        #expect(engine.observers.isEmpty, "the forward is the engine's own, not one of the observers it was made with")
        let manager = TestManager(engine: engine)
        manager.send(TestRequest("/items"))
        #expect(seen.withLock { $0 } == ["monitor started 1", "monitor finished 1 200"])
        engine.eventMonitor = nil
        #expect(engine.eventMonitor == nil)
        manager.send(TestRequest("/items"))
        #expect(seen.withLock { $0 }.count == 2, "no attempt after the reset tells it")
        #expect(APIEngine(configuration: engine.configuration).eventMonitor == nil, "a monitor is not a setting")
    }

    @Test func anAttemptBegunBeforeTheMonitorWasSetDoesNotTellIt() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/slow", MockTransport.Reply.json("{}").after(1))
        let timeline = Locked<[String]>([])
        let engine = observedEngine([TimelineObserver(timeline: timeline)], transport: transport, clock: clock)
        let manager = TestManager(engine: engine)
        manager.send(TestRequest("/slow"))
        engine.eventMonitor = { event in timeline.withLock { $0.append(line(of: event)) } }
        manager.send(TestRequest("/slow"))
        clock.runUntilIdle()
        let lines = timeline.withLock { $0 }
        #expect(lines.filter { $0.hasPrefix("monitor") } == ["monitor started 1", "monitor finished 1 200"])
        #expect(lines.filter { $0.hasPrefix("observer ended") }.count == 2)
    }

    @Test func aFailureBeforeSendingReachesTheMonitorWithoutARequestAndNoObserverEnd() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let timeline = Locked<[String]>([])
        let engine = observedEngine([TimelineObserver(timeline: timeline)], transport: transport, clock: clock)
        engine.eventMonitor = { event in timeline.withLock { $0.append(line(of: event)) } }
        let manager = TestManager(engine: engine)
        manager.send(TestRequest("/{missing}"))
        #expect(timeline.withLock { $0 } == ["observer started 1", "monitor failed 1 unsent"])
        #expect(transport.requests.isEmpty)
    }

    @Test func theCircuitsAndTheBudgetsNoticesReachTheMonitorWithTheRequest() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/down", .status(503))
        let timeline = Locked<[String]>([])
        let engine = observedEngine(
            [TimelineObserver(timeline: timeline)], transport: transport, clock: clock,
            circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 1, openInterval: 10))
        let requests = Locked<[URLRequest?]>([])
        engine.eventMonitor = { event in
            timeline.withLock { $0.append(line(of: event)) }
            if case .circuitOpened = event.kind { requests.withLock { $0.append(event.request) } }
        }
        var request = TestRequest("/down")
        request.headers = ["Authorization": "Bearer secret"]
        let manager = TestManager(engine: engine)
        manager.send(request)
        manager.send(request)
        #expect(
            timeline.withLock { $0 } == [
                "observer started 1", "observer sent 1", "monitor started 1", "observer ended 1 503",
                "monitor finished 1 503", "observer circuitOpened", "monitor circuitOpened",
                "observer started 1", "monitor failed 1 unsent",
            ])
        #expect(requests.withLock { $0 }.first??.url?.path == "/down")
    }

    @Test func aSharedRequestsFollowerJoinsItsLeaderOnWorkQueues() async {
        let transport = MockTransport()
        transport.stub(nil, "/items", MockTransport.Reply.json("{}").held())
        let timeline = Locked<[String]>([])
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .concurrent(label: "monitor-tests")
        configuration.observers = [TimelineObserver(timeline: timeline)]
        let engine = APIEngine(configuration: configuration)
        engine.eventMonitor = { event in timeline.withLock { $0.append(line(of: event)) } }
        let manager = TestManager(engine: engine)
        var request = TestRequest("/items")
        request.sharing = .always
        let first = Task.detached { try? await manager.response(for: request) }
        while !timeline.withLock({ $0.contains("monitor started 1") }) { await Task.yield() }
        let second = Task.detached { try? await manager.response(for: request) }
        while !timeline.withLock({ $0.contains { $0.hasPrefix("monitor joined") } }) { await Task.yield() }
        transport.releaseAll()
        _ = await (first.value, second.value)
        let lines = timeline.withLock { $0 }
        #expect(lines.contains("observer sent 1 with 1") && lines.contains("monitor joined 1 with 1"))
        #expect(lines.filter { $0 == "monitor finished 1 200" }.count == 2, "each attempt of the flight hears its end")
    }
}
