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
        #expect(Array(h.lastActions) == [.scheduleThrottleTurn(scope, after: 0.75)], "the turn at 11")
        let third = h.sendPaced(.throttle, scope: scope, at: 10.5)
        #expect(Array(h.lastActions).isEmpty, "one turn timer at a time: it waits behind the second")
        h.finish(first)
        h.run { $0.throttleTurnCame(for: scope, now: 11) }
        #expect(second.phase == .running)
        #expect(third.phase == .waiting)
        #expect(h.lastActions.contains(.scheduleThrottleTurn(scope, after: 1)), "the next turn, at 12")
        h.run { $0.throttleTurnCame(for: scope, now: 12) }
        #expect(third.phase == .running)
        #expect(!h.lastActions.contains { if case .scheduleThrottleTurn = $0 { true } else { false } })
    }

    @Test(arguments: [nil, "refresh"] as [String?])
    func aCancelledWaitingTaskGivesItsTurnToTheNextOne(scope: String?) {
        var h = MachineHarness()
        h.sendPaced(.throttle, scope: scope, at: 10)
        let second = h.sendPaced(.throttle, scope: scope, at: 10.25)
        h.run { $0.cancel(second, reason: .explicit) }
        let third = h.sendPaced(.throttle, scope: scope, at: 10.5)
        #expect(Array(h.lastActions).isEmpty, "the second's timer, still set, is its turn")
        let fourth = h.sendPaced(.throttle, scope: scope, at: 10.5)
        h.run { $0.throttleTurnCame(for: scope, now: 11) }
        #expect(third.phase == .running, "the turn at 11, not 12")
        #expect(fourth.phase == .waiting)
        h.run { $0.throttleTurnCame(for: scope, now: 12) }
        #expect(fourth.phase == .running, "the turn after it, at 12")
    }

    /// Issue 40, item 9: a waiting task that ends leaves no gap, wherever it was in the queue: the
    /// ones behind it move up a turn.
    @Test(arguments: [nil, "refresh"] as [String?])
    func aWaitingTaskThatEndsLeavesNoGapBehindIt(scope: String?) {
        var h = MachineHarness()
        h.sendPaced(.throttle, scope: scope, at: 0)
        let second = h.sendPaced(.throttle, scope: scope, at: 0.1)  // its turn at 1
        let third = h.sendPaced(.throttle, scope: scope, at: 0.2)  // at 2
        let fourth = h.sendPaced(.throttle, scope: scope, at: 0.3)  // at 3
        h.run { $0.cancel(third, reason: .explicit) }
        h.run { $0.deadlineFired(second, deadline: 0.5) }
        h.run { $0.throttleTurnCame(for: scope, now: 1) }
        #expect(fourth.phase == .running, "at 1, the first turn: nothing waits ahead of it any more")
        let fifth = h.sendPaced(.throttle, scope: scope, at: 1.5)
        #expect(Array(h.lastActions) == [.scheduleThrottleTurn(scope, after: 0.5)], "at 2, one after the fourth")
        #expect(fifth.phase == .waiting)
    }

    @Test func aThrottledTaskWaitsNoLongerThanItsLineLimit() {
        var h = MachineHarness()
        h.sendPaced(.throttle, at: 0)
        let task = AnyAPITask(
            identifier: 2, settings: .init(policy: .throttle, lineLimit: .init(maxWait: 0.5)), engine: nil)
        h.tasks.append(task)
        h.run { $0.send(task, observed: false, now: 0.1) }
        #expect(h.lastActions.contains(.scheduleWaitLimit(task, after: 0.5)))
        h.run { $0.waitLimitFired(task, maxWait: 0.5) }
        #expect(
            h.events(of: task).last?.hasPrefix("failed The request was not sent: it waited in its line for 0.5 s")
                == true)
        h.run { $0.throttleTurnCame(for: nil, now: 1) }
        #expect(h.starts.count == 1, "the turn finds nothing waiting")
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
        var deadline: TimeInterval?
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

    // MARK: Every waiting throttled task has its turn (issue 40, item 9)

    /// A randomized driver on the virtual clock: throttled tasks of three scope keys (none, "a",
    /// "b") among tasks of every other policy, cancelled, ended by deadlines, by `cancelOthers`, by
    /// `cancelTasks(where:)` and by line limits, answered after random delays. After every step,
    /// every throttled task still waiting was sent less than (throttled tasks waiting ahead of it
    /// when it was sent + 1) × interval ago.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8])
    func everyWaitingThrottledTaskStartsOrEndsWithinItsTurns(seed: UInt64) {
        var random = SplitMix64(state: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        let (clock, transport, manager) = pacedManager()
        transport.stub(nil, "/slow", MockTransport.Reply.json(#"{"value":"slow"}"#).after(0.7))
        let interval = 1.0
        var throttled: [(task: APITask<SearchRequest>, scope: String?, bound: Double)] = []
        var everything: [APITask<SearchRequest>] = []
        func sendThrottled(_ request: SearchRequest) {
            let scope = request.concurrencyScope
            let ahead = throttled.filter { $0.scope == scope && $0.task.state.name == "waiting" }.count
            let task = manager.send(request)
            throttled.append((task, scope, clock.now + Double(ahead + 1) * interval + 1e-9))
            everything.append(task)
        }
        for step in 0..<600 {
            switch pick(12) {
            case 0, 1, 2, 3:
                var request = SearchRequest(
                    query: "t", concurrencyPolicy: .throttle, concurrencyScope: [nil, "a", "b"][pick(3)])
                request.throttleInterval = interval
                if pick(8) == 0 { request.lineLimit = .init(maxWait: Double(pick(4)) + 0.5) }
                sendThrottled(request)
            case 4, 5:
                let policy = APIConcurrencyPolicy.allCases[pick(APIConcurrencyPolicy.allCases.count)]
                var request = SearchRequest(
                    query: "o", concurrencyPolicy: policy == .durable ? .default : policy,
                    concurrencyScope: [nil, "a", "b"][pick(3)])
                request.path = pick(2) == 0 ? "/search" : "/slow"
                if request.concurrencyPolicy == .throttle {
                    sendThrottled(request)
                } else {
                    everything.append(manager.send(request))
                }
            case 6:
                everything.randomElement(using: &random)?.cancel()
            case 7:
                let chosen = UInt64(pick(5))
                manager.cancelTasks { $0.identifier % 5 == chosen }
            default:
                clock.advance(by: [0.05, 0.1, 0.3, 0.7][pick(4)])
            }
            for entry in throttled where entry.task.state.name == "waiting" {
                #expect(
                    clock.now <= entry.bound,
                    "seed \(seed) step \(step): task \(entry.task.identifier) of \(entry.scope ?? "nil") still waits at \(clock.now), past \(entry.bound)"
                )
            }
        }
        var rounds = 0
        while manager.engine.inFlightCount > 0, rounds < 10_000 {
            clock.advance(by: 0.1)
            rounds += 1
        }
        #expect(manager.engine.inFlightCount == 0)
        #expect(everything.allSatisfy { $0.state.isTerminal })
    }

    /// The stress of the report, on the virtual clock: four threads send tasks of every policy
    /// (a tenth with a short deadline; some cancelled at once, some cancelling an earlier one, a few
    /// `cancelTasks(where:)`) while a fifth advances the clock; once they stop, every task ends
    /// within the turns still waiting.
    @Test(arguments: [UInt64(21), 22])
    func noThrottledTaskIsLeftWaitingAfterAConcurrentStorm(seed: UInt64) {
        let (clock, transport, manager) = pacedManager()
        transport.stub(nil, "/slow", MockTransport.Reply.json(#"{"value":"slow"}"#).after(0.002))
        let sent = Locked<[APITask<SearchRequest>]>([])
        let stop = Locked(false)
        let ticker = Thread {
            while !stop.withLock({ $0 }) {
                clock.advance(by: 0.001)
                sched_yield()
            }
        }
        ticker.start()
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var random = SplitMix64(state: seed &* 31 &+ UInt64(thread))
            var mine: [APITask<SearchRequest>] = []
            for _ in 0..<1_500 {
                var policy = APIConcurrencyPolicy.allCases.randomElement(using: &random) ?? .throttle
                if policy == .durable { policy = .throttle }
                var request = SearchRequest(
                    query: "s", concurrencyPolicy: policy,
                    concurrencyScope: [nil, "a", "b", "c"].randomElement(using: &random) ?? nil)
                request.path = Bool.random(using: &random) ? "/search" : "/slow"
                request.throttleInterval = 0.01
                if Int.random(in: 0..<10, using: &random) == 0 { request.deadline = 0.002 }
                let task = manager.send(request)
                mine.append(task)
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<8: task.cancel()
                case 8..<14: mine.randomElement(using: &random)?.cancel()
                case 14: manager.cancelTasks { _ in Bool.random() }
                default: break
                }
            }
            sent.withLock { $0 += mine }
        }
        stop.withLock { $0 = true }
        while !ticker.isFinished { sched_yield() }
        let waiting = manager.engine.inFlightCount
        // What is left waits for a debounce's quiet time (0.3 s), a slow answer (2 ms), or a
        // throttle's turn behind at most all of them (10 ms each): within that, all have ended.
        let limit = clock.now + 0.31 + Double(waiting + 2) * 0.01
        while clock.now < limit { clock.advance(by: 0.001) }
        #expect(manager.engine.inFlightCount == 0, "\(manager.engine.inFlightCount) of \(waiting) still in flight")
        #expect(sent.withLock { $0 }.allSatisfy { $0.state.isTerminal })
    }
}
