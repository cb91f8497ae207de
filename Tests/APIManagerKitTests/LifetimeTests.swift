import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

/// A clock that keeps every action it was given, cancelled or not, as `asyncAfter` keeps a
/// cancelled work item's closure until its due time.
final class HoardingClock: APIClock, @unchecked Sendable {
    // @unchecked: `actions` is only touched under `lock`; `base` is thread-safe.
    let base = TestClock()
    private let lock = NSLock()
    private var actions: [@Sendable () -> Void] = []

    var now: TimeInterval { base.now }
    var date: Date { base.date }

    func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> any APICancellable {
        lock.withLock { actions.append(action) }
        return base.schedule(after: delay, action)
    }
}

/// Weakly holds what a test expects to be released.
final class WeakBox<Object: AnyObject>: @unchecked Sendable {
    // @unchecked: written once, before the box is shared.
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

@Suite("Lifetimes", .timeLimit(.minutes(1)))
struct LifetimeTests {
    private func manager(clock: HoardingClock, transport: MockTransport) -> TestManager {
        TestManager(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    }

    @Test func aFinishedTaskWithADeadlineIsReleasedAlthoughItsClockKeepsTheTimer() {
        let clock = HoardingClock()
        let transport = MockTransport(clock: clock.base)
        transport.stub(nil, "/ok", .json("{}"))
        let manager = manager(clock: clock, transport: transport)
        let box = WeakBox(manager.send(TestRequest("/ok", deadline: 60)))
        #expect(box.object == nil, "the deadline timer's closure must not keep the finished task")
        _ = manager
    }

    @Test func aCancelledTaskWaitingForRetryIsReleasedAlthoughItsClockKeepsTheTimer() {
        let clock = HoardingClock()
        let transport = MockTransport(clock: clock.base)
        transport.stub(nil, "/flaky", .status(503))
        let manager = manager(clock: clock, transport: transport)
        var task: APITask<TestRequest>? = manager.send(
            TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 30, jitter: .none)))
        #expect(task?.state.name == "waitingForRetry")
        task?.cancel()
        let box = WeakBox(task!)
        task = nil
        #expect(box.object == nil, "the retry timer's closure must not keep the cancelled task")
    }

    @Test func cancellingADispatchClockTimerReleasesItsActionAtOnce() {
        let queue = DispatchQueue(label: "lifetime.timers")
        let clock = DispatchClock(queue: queue)
        final class Payload: Sendable {}
        var payload: Payload? = Payload()
        let box = WeakBox(payload!)
        let timer = clock.schedule(after: 3_600) { [payload] in _ = payload }
        payload = nil
        #expect(box.object != nil, "an armed timer keeps its action")
        timer.cancel()
        #expect(box.object == nil)
        queue.sync {}
    }

    @Test func aDispatchClockTimerWhoseHandleIsDroppedStillFires() async {
        let clock = DispatchClock()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            _ = clock.schedule(after: 0) { continuation.resume() }
        }
    }

    @Test func aManagerReleasedWhileItsDeliveryQueueIsBlockedCancelsItsTasksAtOnce() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        let blocked = DispatchQueue(label: "lifetime.blocked-delivery")
        let gate = DispatchSemaphore(value: 0)
        blocked.async { gate.wait() }
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .queue(blocked), execution: .inline))
        let task = manager?.send(TestRequest("/held"))
        #expect(transport.heldCount == 1)
        manager = nil
        #expect(transport.cancelledRequests.count == 1, "the pending delivery must not keep the engine alive")
        #expect(task?.state.name == "cancelled(managerReleased)")
        gate.signal()
        blocked.sync {}
    }

    /// A task reads its record inside its engine's locked state, which it keeps: the events no delivery
    /// run took must not keep the task (and so that state) alive once the engine is gone.
    @Test func aTaskKeptAfterItsEngineKeepsNeitherItsEventsNorTheEventMonitor() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json("{}"))
        let blocked = DispatchQueue(label: "lifetime.blocked-delivery-2")
        let gate = DispatchSemaphore(value: 0)
        blocked.async { gate.wait() }
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .queue(blocked), execution: .inline))
        final class Screen: Sendable {}
        weak var weakTask: AnyAPITask?
        weak var weakScreen: Screen?
        var kept: AnyAPITask?
        do {
            let screen = Screen()
            weakScreen = screen
            manager?.engine.eventMonitor = { _ in _ = screen }
            let task = manager?.send(TestRequest("/ok"))
            weakTask = task
            #expect(task?.state.isTerminal == true, "finished inline; its events wait for the blocked queue")
            kept = manager?.send(TestRequest("/ok"))
        }
        manager = nil
        #expect(weakTask == nil, "the engine's outbox kept the task, which keeps the engine's state")
        #expect(weakScreen == nil, "a task kept by the app kept the engine's monitor")
        #expect(kept?.state.isTerminal == true)
        gate.signal()
        blocked.sync {}
    }
}
