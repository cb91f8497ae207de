import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// A small seeded generator, so a failing run can be replayed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Stress", .timeLimit(.minutes(1)))
struct StressTests {
    /// Four threads send tasks with random policies, scopes, replies (instant, delayed, failing and
    /// retried), deadlines and cancellations, while advancing the shared virtual clock. Every task
    /// must end with exactly one terminal event, last among its events, matching its final state.
    @Test(arguments: [UInt64(1), 2, 3])
    func everyTaskEndsExactlyOnceUnderRandomConcurrentLoad(seed: UInt64) {
        let threads = 4
        let tasksPerThread = 600
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/instant", .json("{}"))
        transport.stub(nil, "/delayed", MockTransport.Reply.json("{}").after(0.5))
        transport.stub(nil, "/failing", MockTransport.Reply.status(503).after(0.2))
        transport.stub(nil, "/broken", .status(200, body: Data("garbage".utf8)))
        let deliveryQueue = DispatchQueue(label: "stress.delivery")
        let recorder = EventRecorder()
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, randomSource: FixedRandom(value: 0.5),
                delivery: .queue(deliveryQueue), execution: .inline))
        manager.delegate = recorder
        let sent = Locked<[APITask<TestRequest>]>([])

        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var random = SplitMix64(state: seed &* 1_000 &+ UInt64(thread))
            var mine: [APITask<TestRequest>] = []
            for _ in 0..<tasksPerThread {
                let policy = APIConcurrencyPolicy.allCases.randomElement(using: &random) ?? .default
                let path = ["/instant", "/delayed", "/failing", "/broken"].randomElement(using: &random) ?? "/instant"
                let scope = ["a", "b", nil].randomElement(using: &random) ?? nil
                let retry = Bool.random(using: &random) ? APIRetryPolicy(maxAttempts: 3, baseDelay: 0.1) : nil
                let deadline: TimeInterval? = Int.random(in: 0..<5, using: &random) == 0 ? 0.7 : nil
                mine.append(manager.send(TestRequest(path, policy, scope: scope, retry: retry, deadline: deadline)))
                switch Int.random(in: 0..<10, using: &random) {
                case 0: mine.randomElement(using: &random)?.cancel()
                case 1: clock.advance(by: 0.1)
                case 2: manager.cancelTasks { $0.identifier % 7 == 0 }
                default: break
                }
            }
            sent.withLock { $0 += mine }
        }
        // Let every delay, retry and deadline run out.
        clock.runUntilIdle()
        deliveryQueue.sync {}

        let tasks = sent.withLock { $0 }
        #expect(tasks.count == threads * tasksPerThread)
        #expect(manager.engine.inFlightCount == 0)
        #expect(transport.pendingCount == 0)
        var eventsByTask: [UInt64: [String]] = [:]
        for line in recorder.events {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let id = UInt64(parts[0]) else { continue }
            eventsByTask[id, default: []].append(String(parts[1]))
        }
        var problems: [String] = []
        for task in tasks {
            let events = eventsByTask[task.identifier] ?? []
            let terminal = events.filter { $0 == "finished" || $0.hasPrefix("failed") }
            guard terminal.count == 1, events.last == terminal.first else {
                problems.append("task \(task.identifier): \(events)")
                continue
            }
            let expected = task.state.name == "finished" ? "finished" : "failed \(task.state.name)"
            if terminal.first != expected {
                problems.append("task \(task.identifier): \(events) but state \(task.state)")
            }
            let starts = events.filter { $0.hasPrefix("start") }
            if starts != (0..<starts.count).map({ "start \($0 + 1)" }) {
                problems.append("task \(task.identifier): starts \(starts)")
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
    }

    /// Eight threads, two managers on two engines sharing a concurrency group, every policy, limits,
    /// priorities, bounded lines, shared identical requests, retries, deadlines and cancellations,
    /// on one virtual clock. Every task ends exactly once, and engines, group and flights end empty.
    @Test(arguments: [UInt64(11), 12])
    func everyPolicyLimitGroupAndSharingUnderEightThreads(seed: UInt64) {
        let threads = 8
        let tasksPerThread = 250
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/instant", .json("{}"))
        transport.stub(nil, "/delayed", MockTransport.Reply.json("{}").after(0.5))
        transport.stub(nil, "/failing", MockTransport.Reply.status(503).after(0.2))
        let group = APIConcurrencyPolicy.Group(limit: 3)
        let recorders = [EventRecorder(), EventRecorder()]
        let managers = recorders.map { recorder in
            let manager = TestManager(
                engine: APIEngine(
                    transport: transport, clock: clock, randomSource: FixedRandom(value: 0.5), delivery: .inline,
                    execution: .inline))
            manager.delegate = recorder
            return manager
        }
        let sent = Locked<[(Int, APITask<TestRequest>)]>([])

        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var random = SplitMix64(state: seed &* 1_000 &+ UInt64(thread))
            var mine: [(Int, APITask<TestRequest>)] = []
            for _ in 0..<tasksPerThread {
                let which = Int.random(in: 0..<2, using: &random)
                var request = TestRequest(
                    ["/instant", "/delayed", "/failing"].randomElement(using: &random) ?? "/instant",
                    APIConcurrencyPolicy.allCases.randomElement(using: &random) ?? .default,
                    scope: ["a", "b", nil].randomElement(using: &random) ?? nil,
                    retry: Bool.random(using: &random) ? APIRetryPolicy(maxAttempts: 2, baseDelay: 0.1) : nil,
                    deadline: Int.random(in: 0..<6, using: &random) == 0 ? 0.7 : nil)
                request.priority = Int.random(in: -1...2, using: &random)
                request.concurrencyLimit = Int.random(in: 1...3, using: &random)
                if Bool.random(using: &random) { request.group = group }
                if Int.random(in: 0..<3, using: &random) == 0 { request.sharing = .safeMethods }
                if Int.random(in: 0..<5, using: &random) == 0 {
                    request.lineLimit = APIConcurrencyPolicy.LineLimit(maxLength: 3, maxWait: 0.6)
                }
                mine.append((which, managers[which].send(request)))
                switch Int.random(in: 0..<12, using: &random) {
                case 0: mine.randomElement(using: &random)?.1.cancel()
                case 1: clock.advance(by: 0.1)
                case 2: managers[which].cancelTasks { $0.identifier % 5 == 0 }
                default: break
                }
            }
            sent.withLock { $0 += mine }
        }
        clock.runUntilIdle()

        let tasks = sent.withLock { $0 }
        #expect(tasks.count == threads * tasksPerThread)
        for manager in managers { #expect(manager.engine.inFlightCount == 0) }
        #expect(group.runningCount == 0 && group.waitingCount == 0)
        for manager in managers { #expect(manager.engine.sharedFlights.count == 0) }
        #expect(transport.pendingCount == 0)
        var problems: [String] = []
        for (which, task) in tasks {
            let events = recorders[which].events(of: task)
            let terminal = events.filter { $0 == "finished" || $0.hasPrefix("failed") }
            if terminal.count != 1 || events.last != terminal.first {
                problems.append("task \(which)/\(task.identifier): \(events)")
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
    }

    /// `waitUntilDone` tasks of one scope never overlap on the wire, even when sent from many threads.
    @Test func waitUntilDoneNeverOverlapsWhenSentFromManyThreads() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/cart", MockTransport.Reply.json("{}").after(0.01))
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<100 { manager.send(TestRequest("/cart", .waitUntilDone)) }
        }
        clock.runUntilIdle()
        let records = transport.records
        #expect(records.count == 400)
        for (earlier, later) in zip(records, records.dropFirst()) {
            #expect((earlier.endedAt ?? .infinity) <= later.sentAt)
        }
    }
}

/// The corrections issue, item 28: engines made with the default execution share the process's
/// lanes, so a thousand of them (a manager each, the README's `init(engine: APIEngine = APIEngine())`
/// pattern) do not each bring threads of their own (the thread count is checked on real threads in
/// `SharedLanesIntegrationTests`).
@Suite("Shared work lanes", .timeLimit(.minutes(1)))
struct SharedLanesTests {
    @Test func enginesMadeWithTheDefaultShareTheProcesssLanes() throws {
        guard case .lanes(let first) = APIEngine().execution, case .lanes(let second) = APIEngine().execution
        else {
            Issue.record("the default execution is lanes")
            return
        }
        #expect(first === APIEngine.WorkLanes.shared && second === first)
        guard case .lanes(let own) = APIEngine.Execution.concurrent() else { return }
        #expect(own !== APIEngine.WorkLanes.shared, "an engine may still ask for lanes of its own")
    }
}
