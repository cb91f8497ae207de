// Debounce and throttle (issue 22, items 5 and 6): on the scheduling machine alone, then through a
// manager on a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

extension MachineHarness {
    /// Sends a debounced or throttled task at `now` on the engine's clock.
    @discardableResult
    mutating func sendPaced(
        _ policy: APIConcurrencyPolicy, scope: String? = nil, at now: Double = 0, debounce: Double = 0.3,
        throttle: Double = 1, mode: APIConcurrencyPolicy.ThrottleMode = .wait
    ) -> AnyAPITask {
        let task = AnyAPITask(
            identifier: UInt64(tasks.count + 1), policy: policy, scope: scope,
            pacing: .init(debounceInterval: debounce, throttleInterval: throttle, throttleMode: mode))
        tasks.append(task)
        run { machine in machine.send(task, observed: false, now: now) }
        return task
    }
}

@Suite("Debounce and throttle", .timeLimit(.minutes(1)))
struct DebounceAndThrottleTests {
    // MARK: Debounce, on the machine

    @Test func passedThrottleTurnsOfManyScopesAreForgotten() {
        var h = MachineHarness()
        for index in 0..<1_000 {
            // Each scope's turn has passed by the time the next scope's task is sent.
            let task = h.sendPaced(.throttle, scope: "item-\(index)", at: Double(index) * 2, throttle: 1)
            #expect(task.phase == .running)
        }
        #expect(h.machine.throttleTurnCount < 20, "passed turns are pruned as they pile up")
        let again = h.sendPaced(.throttle, scope: "item-999", at: 1_998.5, throttle: 1)
        #expect(again.phase == .waiting, "a live turn is kept")
    }

    @Test(arguments: [nil, "search"] as [String?])
    func aNewerDebouncedTaskReplacesTheOneStillInItsQuietWait(scope: String?) {
        var h = MachineHarness()
        let first = h.sendPaced(.debounce, scope: scope)
        let second = h.sendPaced(.debounce, scope: scope)
        #expect(h.events(of: first) == ["waiting", "failed cancelled(policy)"])
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(second, after: 0.3)])
        h.run { $0.quietEnded(first) }
        #expect(h.starts.isEmpty, "the replaced task's timer starts nothing")
        h.run { $0.quietEnded(second) }
        #expect(h.starts == ["2#1"])
    }

    @Test func aDebouncedTaskStartsAlongsideWhatRunsOnceItsWaitIsOver() {
        var h = MachineHarness()
        let running = h.send(.default)
        let task = h.sendPaced(.debounce)
        h.run { $0.quietEnded(task) }
        #expect(h.machine.inFlightTasks == [running, task])
        let later = h.sendPaced(.debounce)
        #expect(task.phase == .running, "a started debounced task is not replaced")
        #expect(later.phase == .waiting)
    }

    @Test func aQuietTaskIsInFlightForTheOtherPolicies() {
        var h = MachineHarness()
        let quiet = h.sendPaced(.debounce)
        let pull = h.send(.ignoreCurrent)
        #expect(h.events(of: pull) == ["failed ignored"])
        let cart = h.send(.waitUntilDone)
        #expect(h.events(of: cart) == ["waiting", "started 1"], "nothing runs: the line's head starts at once")
        let search = h.send(.cancelOthers)
        #expect(h.events(of: quiet).last == "failed cancelled(policy)")
        #expect(h.machine.inFlightTasks == [search])
    }

    @Test func cancellingADebouncedTaskCancelsItsTimer() {
        var h = MachineHarness()
        let task = h.sendPaced(.debounce)
        let timer = NamedHandle()
        h.run { $0.waitTimerSet(task, timer: timer) }
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [.cancel(.init(timer))])
        #expect(h.machine.inFlightCount == 0)
    }

    // MARK: Throttle, on the machine

    @Test(arguments: [nil, "refresh"] as [String?])
    func throttledTasksTakeOneTurnPerInterval(scope: String?) {
        var h = MachineHarness()
        let first = h.sendPaced(.throttle, scope: scope, at: 10)
        #expect(first.phase == .running)
        let second = h.sendPaced(.throttle, scope: scope, at: 10.25)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(second, after: 0.75)], "its turn is at 11")
        let third = h.sendPaced(.throttle, scope: scope, at: 10.5)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(third, after: 1.5)], "the turn after, at 12")
        h.finish(first)
        h.run { $0.quietEnded(second) }
        #expect(second.phase == .running)
        #expect(third.phase == .waiting)
    }

    @Test(arguments: [nil, "refresh"] as [String?])
    func aCancelledWaitingTaskGivesItsTurnToTheNextOne(scope: String?) {
        var h = MachineHarness()
        h.sendPaced(.throttle, scope: scope, at: 10)
        let second = h.sendPaced(.throttle, scope: scope, at: 10.25)
        h.run { $0.cancel(second, reason: .explicit) }
        let third = h.sendPaced(.throttle, scope: scope, at: 10.5)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(third, after: 0.5)], "the turn at 11, not 12")
        let fourth = h.sendPaced(.throttle, scope: scope, at: 10.5)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(fourth, after: 1.5)], "the turn after it, at 12")
    }

    @Test func aCancelledTaskWithLaterTurnsAfterItLeavesTheirTimesAlone() {
        var h = MachineHarness()
        h.sendPaced(.throttle, at: 0)
        let second = h.sendPaced(.throttle, at: 0.1)  // its turn at 1
        let third = h.sendPaced(.throttle, at: 0.2)  // at 2
        h.run { $0.cancel(second, reason: .explicit) }
        #expect(third.phase == .waiting)
        let fourth = h.sendPaced(.throttle, at: 0.3)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(fourth, after: 2.7)], "after the third's turn, at 3")
        h.run { $0.cancel(fourth, reason: .explicit) }
        let fifth = h.sendPaced(.throttle, at: 0.4)
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(fifth, after: 2.6)], "the fourth's turn, given back")
    }

    @Test func aThrottledTaskSentEarlyCanBeIgnoredInstead() {
        var h = MachineHarness()
        h.sendPaced(.throttle, at: 0, mode: .ignore)
        let early = h.sendPaced(.throttle, at: 0.5, mode: .ignore)
        #expect(h.events(of: early) == ["failed ignored"])
        let onTime = h.sendPaced(.throttle, at: 1, mode: .ignore)
        #expect(onTime.phase == .running)
    }

    @Test func theTurnOutlivesTheScopesLastTask() {
        var h = MachineHarness()
        let first = h.sendPaced(.throttle, scope: "refresh", at: 0)
        h.finish(first)
        #expect(h.machine.inFlightCount == 0)
        let second = h.sendPaced(.throttle, scope: "refresh", at: 0.4)
        #expect(second.phase == .waiting, "a second refresh within the interval still waits")
        let elsewhere = h.sendPaced(.throttle, scope: "other", at: 0.4)
        #expect(elsewhere.phase == .running, "another scope has its own turns")
    }

    @Test func aZeroIntervalNeverThrottles() {
        var h = MachineHarness()
        let tasks = (0..<3).map { _ in h.sendPaced(.throttle, at: 5, throttle: 0) }
        #expect(tasks.allSatisfy { $0.phase == .running })
    }

    @Test func debouncedTasksDoNotReplaceThrottledOnes() {
        var h = MachineHarness()
        h.sendPaced(.throttle, at: 0)
        let waitingTurn = h.sendPaced(.throttle, at: 0.1)
        h.sendPaced(.debounce)
        #expect(waitingTurn.phase == .waiting)
    }

    // MARK: Through a manager on a virtual clock

    struct SearchRequest: APIRequest {
        var url = testBaseURL
        var path = "/search"
        var query: String
        var concurrencyPolicy: APIConcurrencyPolicy = .debounce
        var concurrencyScope: String?
        var lineLimit: APIConcurrencyPolicy.LineLimit?
        var throttleInterval: TimeInterval = 1
        var parameters: APIParameters { .query(["q": .string(query)]) }
    }

    final class SearchManager: APIManager {
        typealias Request = SearchRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func typeAheadSendsOnlyTheQueryTypedBeforeThePause() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/search", .json(#"{"value":"found"}"#))
        let manager = SearchManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        var tasks: [APITask<SearchRequest>] = []
        for query in ["s", "sw", "swi", "swif", "swift"] {
            tasks.append(manager.send(SearchRequest(query: query)))
            clock.advance(by: 0.1)
        }
        #expect(transport.records.isEmpty, "still typing")
        clock.advance(by: 0.3)
        #expect(transport.records.compactMap { $0.request.url?.query } == ["q=swift"])
        #expect(tasks.map(\.state.name) == Array(repeating: "cancelled(policy)", count: 4) + ["finished"])
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func aThrottledRefreshThroughAManagerStartsOncePerInterval() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/search", .json(#"{"value":"found"}"#))
        let manager = SearchManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        var refresh = SearchRequest(query: "feed")
        refresh.concurrencyPolicy = .throttle
        let first = manager.send(refresh)
        clock.advance(by: 0.5)
        let second = manager.send(refresh)
        #expect(transport.records.count == 1)
        #expect(first.state.name == "finished")
        #expect(second.state.name == "waiting")
        clock.advance(by: 0.5)
        #expect(transport.records.count == 2, "its turn came one interval after the first start")
        #expect(second.state.name == "finished")
    }

    // MARK: The line limit's maxWait bounds a quiet wait (the corrections issue, item 20)

    private func pacedManager() -> (TestClock, MockTransport, SearchManager) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/search", .json(#"{"value":"found"}"#))
        let manager = SearchManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        return (clock, transport, manager)
    }

    @Test(arguments: [nil, "feed"] as [String?])
    func aThrottledTaskWaitingPastItsMaxWaitEndsAndGivesItsTurnBack(scope: String?) {
        let (clock, transport, manager) = pacedManager()
        var refresh = SearchRequest(query: "feed", concurrencyPolicy: .throttle, concurrencyScope: scope)
        refresh.throttleInterval = 10
        let first = manager.send(refresh)
        clock.advance(by: 1)
        var impatient = refresh
        impatient.lineLimit = APIConcurrencyPolicy.LineLimit(maxWait: 3)
        let second = manager.send(impatient)
        #expect(second.state.name == "waiting", "its turn is at 10 s")
        clock.advance(by: 3)
        #expect(second.state.name == "waitedTooLong(3.0)", "at 4 s, past its maxWait of 3 s")
        #expect(transport.records.count == 1, "nothing sent for it")
        let third = manager.send(refresh)
        clock.advance(by: 5.9)
        #expect(third.state.name == "waiting")
        clock.advance(by: 0.1)
        #expect(transport.records.count == 2, "the third took the turn the second gave back, at 10 s")
        #expect(transport.records.last?.sentAt == 10)
        #expect(first.state.name == "finished" && third.state.name == "finished")
    }

    @Test func aThrottledTaskWhoseTurnComesBeforeItsMaxWaitStartsAtItsTurn() {
        let (clock, transport, manager) = pacedManager()
        var refresh = SearchRequest(query: "feed", concurrencyPolicy: .throttle)
        refresh.throttleInterval = 2
        refresh.lineLimit = APIConcurrencyPolicy.LineLimit(maxLength: 0, maxWait: 5)
        manager.send(refresh)
        let second = manager.send(refresh)
        #expect(second.state.name == "waiting", "maxLength counts the line only; a quiet wait is outside it")
        clock.advance(by: 2)
        #expect(second.state.name == "finished")
        #expect(transport.records.map(\.sentAt) == [0, 2])
    }

    @Test(arguments: [nil, "search"] as [String?])
    func aDebouncedTaskWhoseQuietWaitIsLongerThanItsMaxWaitEndsUnsent(scope: String?) {
        let (clock, transport, manager) = pacedManager()
        var query = SearchRequest(query: "swift", concurrencyScope: scope)
        query.lineLimit = APIConcurrencyPolicy.LineLimit(maxWait: 0.1)
        let task = manager.send(query)
        clock.advance(by: 0.1)
        #expect(task.state.name == "waitedTooLong(0.1)")
        clock.advance(by: 1)
        #expect(transport.records.isEmpty)
        #expect(clock.pendingTimerCount == 0)
    }
}
