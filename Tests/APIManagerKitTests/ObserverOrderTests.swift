// Every observation of a task comes after its `sent`, whatever the threads: a cancel, a policy, a
// line that moves on or the delivery of another task's events on another thread, while the
// observers are still being told the task was sent, never reach the task before them.
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// An observer that, when told a chosen path's task was sent, runs `meanwhile` on another thread
/// and waits for it: what that thread does to the engine happens while `sent` is being told, and
/// the `sent` is recorded after it.
private final class InterruptingObserver: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: `meanwhile` is set before the first send and only read after.
    let recording = RecordingObserver()
    let path: String
    var meanwhile: @Sendable () -> Void = {}

    init(path: String) { self.path = path }

    func observe(_ observation: APIEngine.Observation) {
        // A `sent` is recorded once the observer is done with it, as a tracer keeps its span.
        defer { recording.observe(observation) }
        guard case .sent = observation.kind, (observation.task as? APITask<TestRequest>)?.request.path == path
        else { return }
        let done = DispatchSemaphore(value: 0)
        let meanwhile = self.meanwhile
        Thread.detachNewThread {
            meanwhile()
            done.signal()
        }
        done.wait()
    }
}

/// An observer that is slow in `sent` (it gives its thread away a few hundred times), and checks
/// that every task's first observation is its `sent` and that it is told once.
private final class OrderCheckingObserver: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: `seen` is only touched under its lock.
    /// By task, the task kept so that its identity is not reused.
    private let seen = Locked<[ObjectIdentifier: (task: AnyAPITask, sent: Int, ended: Int, first: String)]>([:])
    private let failures = Locked<[String]>([])
    private let endedCount = Locked(0)
    private let expected: Int
    /// Signalled once `expected` tasks have ended.
    let allEnded = DispatchSemaphore(value: 0)

    init(expected: Int) { self.expected = expected }

    func observe(_ observation: APIEngine.Observation) {
        let line = RecordingObserver.describe(observation)
        if case .sent = observation.kind {
            for _ in 0..<200 { sched_yield() }
        }
        let isSent: Bool
        if case .sent = observation.kind { isSent = true } else { isSent = false }
        let isEnd: Bool
        if case .ended = observation.kind { isEnd = true } else { isEnd = false }
        seen.withLock { seen in
            let key = ObjectIdentifier(observation.task)
            var entry = seen[key] ?? (observation.task, 0, 0, line)
            if !isSent, entry.sent == 0 { failures.withLock { $0.append("before sent: \(line)") } }
            if isSent { entry.sent += 1 }
            if isEnd { entry.ended += 1 }
            seen[key] = entry
        }
        if isEnd,
            endedCount.withLock({
                $0 += 1
                return $0
            }) == expected
        {
            allEnded.signal()
        }
    }

    var problems: [String] { failures.withLock { $0 } }
    var tasks: [(sent: Int, ended: Int, first: String)] {
        seen.withLock { $0.values.map { ($0.sent, $0.ended, $0.first) } }
    }
}

@Suite("Observers: sent first", .timeLimit(.minutes(2)))
struct ObserverOrderTests {
    /// One engine on a serial delivery queue; the transport answers `/held` when released.
    private static func engine(
        _ observer: any APIEngine.Observer, clock: TestClock, transport: MockTransport, delivery: DispatchQueue
    ) -> TestManager {
        TestManager(engine: observedEngine([observer], transport: transport, clock: clock, delivery: .queue(delivery)))
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aTaskCancelledFromAnotherThreadWhileItsSentIsToldEndsAfterIt(scope: String?) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        let delivery = DispatchQueue(label: "order.delivery")
        let observer = InterruptingObserver(path: "/second")
        let manager = Self.engine(observer, clock: clock, transport: transport, delivery: delivery)
        transport.stub(nil, "/second", MockTransport.Reply.json("{}").held())
        observer.meanwhile = {
            manager.cancelTasks { _ in true }
            delivery.sync {}
        }
        let first = manager.send(TestRequest("/held", .cancelOthers, scope: scope))
        let second = manager.send(TestRequest("/second", .cancelOthers, scope: scope))
        manager.cancelTasks { _ in true }
        delivery.sync {}
        let lines = observer.recording.lines(of: second)
        #expect(lines.first == "\(second.identifier) sent", "\(lines)")
        #expect(lines.last?.contains("ended") == true, "\(lines)")
        #expect(observer.recording.lines(of: first).first == "\(first.identifier) sent")
    }

    /// `/held` sent under `policy`, then `/second`: while `/second`'s `sent` is told, another thread
    /// answers `/held` and waits for the delivery of what follows. Returns what `/second` was told.
    private func secondTaskWhileTheFirstEnds(_ policy: APIConcurrencyPolicy, scope: String?) -> [String] {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        transport.stub(nil, "/second", .json("{}"))
        let delivery = DispatchQueue(label: "order.delivery")
        let observer = InterruptingObserver(path: "/second")
        let manager = Self.engine(observer, clock: clock, transport: transport, delivery: delivery)
        observer.meanwhile = {
            transport.releaseAll()
            delivery.sync {}
        }
        manager.send(TestRequest("/held", policy, scope: scope))
        let second = manager.send(TestRequest("/second", policy, scope: scope))
        delivery.sync {}
        return observer.recording.lines(of: second).map { String($0.drop { $0 != " " }.dropFirst()) }
    }

    @Test(arguments: ["search", nil] as [String?])
    func anIgnoredTaskIsToldSentBeforeAnotherTasksDeliveryTellsItsEnd(scope: String?) {
        let lines = secondTaskWhileTheFirstEnds(.ignoreCurrent, scope: scope)
        #expect(lines.first == "sent", "\(lines)")
        #expect(lines.last?.hasPrefix("ended") == true, "\(lines)")
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aLineThatMovesOnWhileItsSentIsToldStartsTheTaskAfterIt(scope: String?) {
        let lines = secondTaskWhileTheFirstEnds(.waitUntilDone, scope: scope)
        #expect(lines.first == "sent", "\(lines)")
        #expect(lines.last == "ended network", "\(lines)")
    }

    /// Thousands of tasks from four threads on a concurrent engine, every policy, scopes and none,
    /// cancels of earlier tasks and of many at once from the other threads, an observer slow in
    /// `sent`: each task is told `sent` once, first, and `ended` once.
    @Test(arguments: [UInt64(11), 12])
    func underConcurrentLoadEveryTaskIsToldSentFirstAndEndedOnce(seed: UInt64) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/instant", .json("{}"))
        transport.stub(nil, "/failing", .status(503))
        let threads = 4
        let perThread = 500
        let observer = OrderCheckingObserver(expected: threads * perThread)
        let manager = TestManager(
            engine: observedEngine(
                [observer], transport: transport, clock: clock,
                delivery: .queue(DispatchQueue(label: "order.stress.delivery")),
                execution: .concurrent(label: "order.stress")))
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var random = SplitMix64(state: seed &* 97 &+ UInt64(thread))
            var mine: [APITask<TestRequest>] = []
            for _ in 0..<perThread {
                let policy = APIConcurrencyPolicy.allCases.randomElement(using: &random) ?? .default
                let scope = ["a", "b", nil].randomElement(using: &random) ?? nil
                let path = Bool.random(using: &random) ? "/instant" : "/failing"
                mine.append(manager.send(TestRequest(path, policy, scope: scope)))
                switch Int.random(in: 0..<20, using: &random) {
                case 0: mine.last?.cancel()
                case 1, 2: mine.randomElement(using: &random)?.cancel()
                case 3: manager.cancelTasks { $0.identifier % 5 == 0 }
                case 4: clock.advance(by: 0.5)
                default: break
                }
            }
        }
        // Debounced and throttled tasks wait on the virtual clock: let every one have its turn.
        var rounds = 0
        while manager.engine.inFlightCount > 0, rounds < 100_000 {
            clock.advance(by: 1)
            sched_yield()
            rounds += 1
        }
        #expect(manager.engine.inFlightCount == 0)
        observer.allEnded.wait()
        #expect(observer.problems.isEmpty, "\(observer.problems.prefix(5))")
        let tasks = observer.tasks
        #expect(tasks.count == threads * perThread)
        let wrong = tasks.filter { $0.sent != 1 || $0.ended != 1 }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }
}
