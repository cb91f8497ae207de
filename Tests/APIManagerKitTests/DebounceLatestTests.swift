// `debounceLatest` (issue 43, item 1): search-as-you-type that never shows a stale answer. It waits
// its quiet interval as `debounce` does, and when it starts, every other task of its scope ends as
// cancelled, so the answer delivered last is always the latest query's. On the machine alone, then
// through a manager on a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("debounceLatest: only the latest query's answer", .timeLimit(.minutes(1)))
struct DebounceLatestTests {
    // MARK: On the machine

    @Test(arguments: [nil, "search"] as [String?])
    func itWaitsItsQuietIntervalThenCancelsTheRunningTaskAsItStarts(scope: String?) {
        var h = MachineHarness()
        let short = h.sendPaced(.debounceLatest, scope: scope)
        h.run { $0.quietEnded(short) }
        #expect(h.events(of: short) == ["waiting", "started 1"])
        let long = h.sendPaced(.debounceLatest, scope: scope)
        #expect(h.events(of: long) == ["waiting"])
        #expect(short.phase == .running, "the running search goes on while the user may still type")
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(long, after: 0.3)])
        h.run { $0.quietEnded(long) }
        #expect(h.events(of: short) == ["waiting", "started 1", "failed cancelled(policy)"])
        #expect(h.events(of: long) == ["waiting", "started 1"])
        #expect(h.machine.inFlightTasks == [long])
    }

    @Test(arguments: [nil, "search"] as [String?])
    func aNewerOneReplacesTheOneStillInItsQuietWait(scope: String?) {
        var h = MachineHarness()
        let first = h.sendPaced(.debounceLatest, scope: scope)
        let second = h.sendPaced(.debounceLatest, scope: scope)
        #expect(h.events(of: first) == ["waiting", "failed cancelled(policy)"])
        h.run { $0.quietEnded(first) }
        #expect(h.starts.isEmpty, "the replaced task's timer starts nothing")
        h.run { $0.quietEnded(second) }
        #expect(h.starts == ["2#1"])
    }

    @Test func itCancelsTheScopesOtherTasksWhateverTheirPolicyAndLeavesOtherScopesAlone() {
        var h = MachineHarness()
        let running = h.send(.default, scope: "search")
        let line = h.send(.waitUntilDone, scope: "search")
        let retrying = h.send(.default, scope: "search")
        h.failForRetry(retrying, delay: 5)
        let elsewhere = h.send(.default, scope: "cart")
        let search = h.sendPaced(.debounceLatest, scope: "search")
        h.run { $0.quietEnded(search) }
        for task in [running, line, retrying] {
            #expect(h.events(of: task).last == "failed cancelled(policy)", "cancelled as the search starts")
        }
        #expect(Set(h.machine.inFlightTasks) == [elsewhere, search])
    }

    @Test func aDebounceTaskAndADebounceLatestTaskDoNotReplaceEachOtherInTheirQuietWaits() {
        var h = MachineHarness()
        let plain = h.sendPaced(.debounce)
        let latest = h.sendPaced(.debounceLatest)
        #expect(plain.phase == .waiting && latest.phase == .waiting)
        h.run { $0.quietEnded(latest) }
        #expect(h.events(of: plain).last == "failed cancelled(policy)", "it is in flight in the scope, so it ends")
        #expect(h.machine.inFlightTasks == [latest])
    }

    @Test func cancelledInItsQuietWaitItCancelsNothing() {
        var h = MachineHarness()
        let running = h.send(.default)
        let search = h.sendPaced(.debounceLatest)
        let timer = NamedHandle()
        h.run { $0.waitTimerSet(search, timer: timer) }
        #expect(Array(h.run { $0.cancel(search, reason: .explicit) }) == [.cancel(.init(timer))])
        h.run { $0.quietEnded(search) }
        #expect(h.machine.inFlightTasks == [running])
    }

    // MARK: Through a manager on a virtual clock

    /// A search whose short queries the server answers slowly (`delays`: seconds per query).
    private func searchManager(
        delays: [String: Double], execution: APIEngine.Execution = .inline
    ) -> (DebounceAndThrottleTests.SearchManager, MockTransport, TestClock) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/search") { request in
            let query = request.url?.query?.replacingOccurrences(of: "q=", with: "") ?? ""
            return MockTransport.Reply.json(#"{"value":"\#(query)"}"#).after(delays[query] ?? 0.1)
        }
        let engine = APIEngine(transport: transport, clock: clock, delivery: .inline, execution: execution)
        return (DebounceAndThrottleTests.SearchManager(engine: engine), transport, clock)
    }

    @Test(arguments: [nil, "search"] as [String?])
    func aSlowShortQueryNeverAnswersAfterTheLongerOneTypedSince(scope: String?) {
        let (manager, transport, clock) = searchManager(delays: ["s": 2])
        let recorder = EventRecorder()
        manager.delegate = recorder
        func type(_ query: String, policy: APIConcurrencyPolicy) -> APITask<DebounceAndThrottleTests.SearchRequest> {
            var request = DebounceAndThrottleTests.SearchRequest(query: query)
            request.concurrencyPolicy = policy
            request.concurrencyScope = scope
            return manager.send(request)
        }
        let short = type("s", policy: .debounceLatest)
        clock.advance(by: 0.5)  // a pause: "s" is sent, and its answer takes 2 s
        var tasks = [short]
        for query in ["sw", "swi", "swift"] {
            tasks.append(type(query, policy: .debounceLatest))
            clock.advance(by: 0.1)
        }
        clock.runUntilIdle()
        #expect(transport.records.compactMap { $0.request.url?.query } == ["q=s", "q=swift"])
        #expect(tasks.map(\.state.name) == Array(repeating: "cancelled(policy)", count: 3) + ["finished"])
        let finished = recorder.events.filter { $0.contains("finished") }
        #expect(finished.count == 1 && finished.first?.hasPrefix("\(tasks[3].identifier) ") == true)
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func withDebounceTheSlowShortAnswerArrivesLastWhichIsWhyDebounceLatestExists() {
        let (manager, _, clock) = searchManager(delays: ["s": 2])
        let answers = Locked<[String]>([])
        let recorder = EventRecorder()
        recorder.onEvent = { line in if line.contains("finished") { answers.withLock { $0.append(line) } } }
        manager.delegate = recorder
        let short = manager.send(DebounceAndThrottleTests.SearchRequest(query: "s"))
        clock.advance(by: 0.5)
        let long = manager.send(DebounceAndThrottleTests.SearchRequest(query: "swift"))
        clock.runUntilIdle()
        #expect(
            answers.withLock { $0 }.map { $0.split(separator: " ").first.map(String.init) } == [
                "\(long.identifier)", "\(short.identifier)",
            ])
    }

    @Test func itWorksOnTheEnginesWorkQueuesWithTheRunningSearchCancelledOnTheWire() async {
        let (manager, transport, clock) = searchManager(
            delays: ["s": 2], execution: .concurrent(label: "debounce-latest"))
        var request = DebounceAndThrottleTests.SearchRequest(query: "s")
        request.concurrencyPolicy = .debounceLatest
        let short = manager.send(request)
        clock.advance(by: 0.3)
        while transport.records.isEmpty { await Task.yield() }
        request.query = "swift"
        let long = Task.detached { try? await manager.response(for: request) }
        while clock.pendingTimerCount < 2 { await Task.yield() }
        clock.advance(by: 0.3)
        // The short search cancelled on the wire, and the long one's answer (0.1 s on the clock)
        // scheduled: the mock records a request before it schedules its answer, so a clock moved as
        // soon as the record is there may move before the answer's timer exists, which then never
        // fires (a hang seen under ThreadSanitizer on a busy machine).
        while transport.records.count < 2 || transport.records[0].outcome != .cancelled
            || clock.pendingTimerCount != 1
        {
            await Task.yield()
        }
        clock.advance(by: 2)
        #expect(await long.value?.value == "swift")
        #expect(short.state.name == "cancelled(policy)")
    }
}
