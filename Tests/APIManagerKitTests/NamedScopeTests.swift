import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Policies in named scopes behave exactly as in the default scope, and cancelling never starts or
/// sends a task that is itself being cancelled.
@Suite("Named scopes and cancelling", .timeLimit(.minutes(1)))
struct NamedScopeTests {
    /// Every sequence of three policies (each row of the interaction table, with what follows it)
    /// gives the same events and the same requests on the wire in a named scope as in the default
    /// scope, step by step while the held requests are released one by one.
    @Test(arguments: APIConcurrencyPolicy.allCases)
    func everyPolicySequenceBehavesInANamedScopeAsInTheDefaultScope(first: APIConcurrencyPolicy) {
        for second in APIConcurrencyPolicy.allCases {
            for third in APIConcurrencyPolicy.allCases {
                let policies = [first, second, third]
                let unnamed = trace(policies, scope: nil)
                let named = trace(policies, scope: "s")
                #expect(named == unnamed, "\(policies)")
            }
        }
    }

    /// Sends the policies to held requests, then releases them one at a time, recording after each
    /// step what every task went through, what is in flight and what is at the transport.
    private func trace(_ policies: [APIConcurrencyPolicy], scope: String?) -> [String] {
        let h = Harness()
        let tasks = policies.map { h.send(TestRequest("/held", $0, scope: scope)) }
        var steps: [String] = []
        func record() {
            let events = tasks.map { h.recorder.events(of: $0).joined(separator: ",") }
            let inFlight = h.manager.inFlightTasks.map { tasks.firstIndex(of: $0) ?? -1 }
            steps.append(
                "events \(events) in flight \(inFlight) count \(h.manager.engine.inFlightCount) held \(h.transport.heldCount)"
            )
        }
        record()
        while h.transport.release() { record() }
        return steps
    }

    @Test func cancelOthersInANamedScopeCancelsEveryEarlierQuery() {
        let h = Harness()
        let queries = (0..<4).map { _ in h.send(TestRequest("/held", .cancelOthers, scope: "search")) }
        #expect(
            queries.dropLast().map(\.state.name) == ["cancelled(policy)", "cancelled(policy)", "cancelled(policy)"])
        #expect(queries.last?.state.name == "running")
        #expect(h.transport.heldCount == 1)
        #expect(h.manager.inFlightTasks == [queries[3]])
    }

    @Test func waitUntilDoneWaitsForACancelOthersTaskThatReopenedItsNamedScope() {
        let h = Harness()
        let add = h.send(TestRequest("/held", scope: "cart"))
        let clear = h.send(TestRequest("/held", .cancelOthers, scope: "cart"))
        let next = h.send(TestRequest("/held", .waitUntilDone, scope: "cart"))
        #expect(add.state.name == "cancelled(policy)")
        #expect(clear.state.name == "running")
        #expect(next.state.name == "waiting", "it must not overlap the running cancelOthers task")
        #expect(h.manager.inFlightTasks == [clear, next])
        #expect(h.manager.engine.inFlightCount == 2)
        h.manager.cancelAll()
        #expect(clear.state.name == "cancelled(explicit)")
        #expect(next.state.name == "cancelled(explicit)")
        #expect(h.transport.pendingCount == 0)
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func cancelAllNeverSendsAQueuedCartMutation(scope: String?) {
        let h = Harness()
        let add = h.send(TestRequest("/held", .waitUntilDone, scope: scope, method: .post))
        let update = h.send(TestRequest("/held", .waitUntilDone, scope: scope, method: .post))
        let remove = h.send(TestRequest("/held", .waitUntilDone, scope: scope, method: .post))
        h.manager.cancelAll()
        #expect(h.transport.records.count == 1, "only the running add was ever sent")
        #expect(h.recorder.events(of: add) == ["start 1", "failed cancelled(explicit)"])
        #expect(h.recorder.events(of: update) == ["waiting", "failed cancelled(explicit)"])
        #expect(h.recorder.events(of: remove) == ["waiting", "failed cancelled(explicit)"])
        #expect(h.manager.engine.inFlightCount == 0)
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func cancelTasksWhereNeverStartsATaskItAlsoCancels(scope: String?) {
        let h = Harness()
        let tasks = (0..<3).map { _ in h.send(TestRequest("/held", .waitUntilDone, scope: scope, method: .post)) }
        h.manager.cancelTasks { _ in true }
        #expect(h.transport.records.count == 1)
        #expect(tasks.map(\.attemptCount) == [1, 0, 0])
        #expect(h.transport.pendingCount == 0)
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func cancelTasksWhereStartsTheFirstTaskItKeeps(scope: String?) {
        let h = Harness()
        let tasks = (0..<4).map { _ in h.send(TestRequest("/held", .waitUntilDone, scope: scope)) }
        h.manager.cancelTasks { $0 != tasks[2] }
        #expect(
            tasks.map(\.state.name) == ["cancelled(explicit)", "cancelled(explicit)", "running", "cancelled(explicit)"])
        #expect(h.transport.records.count == 2)
        #expect(h.recorder.events(of: tasks[1]) == ["waiting", "failed cancelled(explicit)"])
        h.transport.releaseAll()
        #expect(tasks[2].state.name == "finished")
        #expect(h.manager.engine.inFlightCount == 0)
    }

    @Test func aTaskCancelledWhileItsRequestIsBeingBuiltIsNeverSent() {
        // The task cancels itself from inside `urlRequest(for:)`: it has ended before the
        // transport could be given its request.
        let h = Harness()
        let manager = RequestHookManager(h) { task in
            task.cancel()
            return try task.request.makeURLRequest()
        }
        let task = manager.send(TestRequest("/ok"))
        #expect(task.state.name == "cancelled(explicit)")
        #expect(h.transport.records.isEmpty)
    }

    /// Random policies in named scopes, some requests held, then `cancelAll()`: every task ends
    /// exactly once, nothing is left in flight or at the transport, and no scope outlives its tasks.
    @Test(arguments: [UInt64(11), 12, 13])
    func cancelAllEndsEveryTaskOfEveryNamedScopeExactlyOnce(seed: UInt64) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/instant", .json("{}"))
        transport.stub(nil, "/delayed", MockTransport.Reply.json("{}").after(0.5))
        transport.stub(nil, "/failing", MockTransport.Reply.status(503).after(0.2))
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        let recorder = EventRecorder()
        let deliveryQueue = DispatchQueue(label: "named-scopes.delivery")
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, randomSource: FixedRandom(value: 0.5),
                delivery: .queue(deliveryQueue), execution: .inline))
        manager.delegate = recorder
        let sent = Locked<[APITask<TestRequest>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var random = SplitMix64(state: seed &* 100 &+ UInt64(thread))
            var mine: [APITask<TestRequest>] = []
            for _ in 0..<5_000 {  // 20,000 tasks in all, as in the review that found the defect
                let policy = APIConcurrencyPolicy.allCases.randomElement(using: &random) ?? .default
                let path: String
                switch Int.random(in: 0..<10, using: &random) {
                case 0: path = "/held"
                case 1, 2: path = "/delayed"
                case 3: path = "/failing"
                default: path = "/instant"
                }
                let scope = ["search", "cart", "feed", nil].randomElement(using: &random) ?? nil
                let retry = Bool.random(using: &random) ? APIRetryPolicy(maxAttempts: 2, baseDelay: 0.1) : nil
                mine.append(manager.send(TestRequest(path, policy, scope: scope, retry: retry)))
                switch Int.random(in: 0..<20, using: &random) {
                case 0: mine.randomElement(using: &random)?.cancel()
                case 1: clock.advance(by: 0.1)
                default: break
                }
            }
            sent.withLock { $0 += mine }
        }
        manager.cancelAll()
        deliveryQueue.sync {}

        #expect(manager.engine.inFlightCount == 0)
        #expect(manager.inFlightTasks.isEmpty)
        #expect(transport.pendingCount == 0, "every held request was cancelled")
        var terminalCount: [UInt64: Int] = [:]
        for line in recorder.events {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let id = UInt64(parts[0]) else { continue }
            if parts[1] == "finished" || parts[1].hasPrefix("failed") { terminalCount[id, default: 0] += 1 }
        }
        let tasks = sent.withLock { $0 }
        let wrong = tasks.filter { terminalCount[$0.identifier] != 1 || !$0.state.isTerminal }
        #expect(
            wrong.isEmpty, "\(wrong.prefix(5).map { "\($0): \(terminalCount[$0.identifier] ?? 0) terminal events" })")
        // Nothing runs after the cancellation: the clock has nothing left that sends.
        let sentBefore = transport.records.count
        clock.runUntilIdle()
        #expect(transport.records.count == sentBefore)
    }
}
