// `send(_:completion:)` (issue 43, item 3): a closure per call, called exactly once with the task's
// typed outcome, also for cancelled, ignored and replaced tasks, in the caller's isolation: on the
// delivery for a caller on no actor, on the main actor for one there, on its actor for another.
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// The outcomes a completion was called with, as lines ("value a", "failed cancelled(policy)").
private final class Outcomes: @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []

    var all: [String] { lock.withLock { lines } }

    func record(_ result: Result<Echo, APIError>) {
        let line: String
        switch result {
        case .success(let echo): line = "value \(echo.value ?? "-")"
        case .failure(let error): line = "failed \(describe(error))"
        }
        lock.withLock { lines.append(line) }
    }
}

@Suite("send(_:completion:): one call of the closure per task", .timeLimit(.minutes(1)))
struct CompletionTests {
    private func inlineManager() -> (TestManager, MockTransport, TestClock) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let engine = APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline)
        return (TestManager(engine: engine), transport, clock)
    }

    @Test(arguments: [nil, "items"] as [String?])
    func aFinishedTaskGivesItsTypedResponseOnceAfterTheDelegateHeardIt(scope: String?) {
        let (manager, transport, clock) = inlineManager()
        transport.stub(.get, "/a", .json(#"{"value":"a"}"#).after(0.2))
        let recorder = EventRecorder()
        manager.delegate = recorder
        let outcomes = Outcomes()
        let order = Locked<[String]>([])
        recorder.onEvent = { line in if line.contains("finished") { order.withLock { $0.append("delegate") } } }
        let task = manager.send(TestRequest("/a", scope: scope)) { result in
            order.withLock { $0.append("completion") }
            outcomes.record(result)
        }
        #expect(outcomes.all.isEmpty, "nothing before the task ends")
        clock.advance(by: 0.2)
        #expect(outcomes.all == ["value a"])
        #expect(order.withLock { $0 } == ["delegate", "completion"])
        #expect(task.state == .finished)
        clock.runUntilIdle()
        #expect(outcomes.all == ["value a"], "once")
    }

    @Test(arguments: [nil, "items"] as [String?])
    func everyWayATaskEndsWithoutAResponseCallsItOnceWithTheError(scope: String?) {
        let (manager, transport, clock) = inlineManager()
        transport.stub(nil, "/slow", .json("{}").after(5))
        transport.stub(nil, "/flaky", .status(503))
        let outcomes = Outcomes()
        // Replaced by a newer task of its scope.
        manager.send(TestRequest("/slow", .cancelOthers, scope: scope)) { outcomes.record($0) }
        manager.send(TestRequest("/slow", .cancelOthers, scope: scope)) { _ in }
        #expect(outcomes.all == ["failed cancelled(policy)"])
        // Ignored while its scope is busy.
        manager.send(TestRequest("/slow", .ignoreCurrent, scope: scope)) { outcomes.record($0) }
        #expect(outcomes.all.last == "failed ignored")
        // Cancelled while waiting in line, while running, while waiting to retry.
        let waiting = manager.send(TestRequest("/slow", .waitUntilDone, scope: scope)) { outcomes.record($0) }
        waiting.cancel()
        let running = manager.send(TestRequest("/slow", scope: "other")) { outcomes.record($0) }
        running.cancel()
        let retrying = manager.send(
            TestRequest("/flaky", scope: "third", retry: APIRetryPolicy(baseDelay: 10, jitter: .none))
        ) {
            outcomes.record($0)
        }
        #expect(retrying.state == .waitingForRetry)
        retrying.cancel()
        // Failed with the server's status; timed out by its deadline.
        manager.send(TestRequest("/flaky", scope: "fourth")) { outcomes.record($0) }
        manager.send(TestRequest("/slow", scope: "fifth", deadline: 1)) { outcomes.record($0) }
        clock.advance(by: 1)
        #expect(
            outcomes.all == [
                "failed cancelled(policy)", "failed ignored", "failed cancelled(explicit)",
                "failed cancelled(explicit)", "failed cancelled(explicit)", "failed status(503)", "failed timedOut",
            ])
        clock.runUntilIdle()
        #expect(outcomes.all.count == 7, "no second call")
    }

    @Test func aTaskWhoseManagerIsReleasedInFlightHearsSoOnce() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/slow", .json("{}").after(5))
        let outcomes = Outcomes()
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let task = manager?.send(TestRequest("/slow")) { outcomes.record($0) }
        manager = nil
        #expect(outcomes.all == ["failed cancelled(managerReleased)"])
        clock.runUntilIdle()
        #expect(outcomes.all.count == 1)
        _ = task
    }

    @Test func anEndQueuedOnADeliveryThatNeverRunsStillCallsItOnceWhenTheEngineGoes() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#))
        let outcomes = Outcomes()
        let stopped = DispatchQueue(label: "never-runs")
        stopped.suspend()
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .queue(stopped), execution: .inline))
        manager?.send(TestRequest("/a")) { outcomes.record($0) }
        #expect(outcomes.all.isEmpty, "its end waits on the stopped queue")
        manager = nil
        stopped.resume()
        stopped.sync {}
        #expect(outcomes.all.count == 1, "called once: \(outcomes.all)")
    }

    @Test func aCompletionCalledAsTheEngineGoesIsOutsideItsLock() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#))
        transport.stub(nil, "/slow", .json("{}").after(5))
        let stopped = DispatchQueue(label: "never-runs")
        stopped.suspend()
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .queue(stopped), execution: .inline))
        // Kept by the test: its state is read under the lock its engine's tasks share.
        let other = manager?.send(TestRequest("/slow"))
        let seen = Locked<[String]>([])
        manager?.send(TestRequest("/a")) { result in
            // Inside the engine's lock, this read would wait for itself.
            seen.withLock { $0.append("\(other?.state.isTerminal == true) \((try? result.get())?.value ?? "-")") }
        }
        manager = nil
        stopped.resume()
        stopped.sync {}
        #expect(seen.withLock { $0 }.count == 1)
    }

    @Test func aCallerOnNoActorHearsOnTheManagersDeliveryQueue() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#).after(0.1))
        let delivery = DispatchQueue(label: "delivery")
        let key = DispatchSpecificKey<Int>()
        delivery.setSpecific(key: key, value: 7)
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .queue(delivery), execution: .inline))
        let onDelivery = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Self.sendFromNoActor(manager) { _ in
                continuation.resume(returning: DispatchQueue.getSpecific(key: key) == 7)
            }
            clock.advance(by: 0.1)
        }
        #expect(onDelivery)
    }

    private nonisolated static func sendFromNoActor(
        _ manager: TestManager, _ body: @escaping @Sendable (Result<Echo, APIError>) -> Void
    ) {
        manager.send(TestRequest("/a"), completion: body)
    }

    /// A screen on the main actor that sends with a completion on an engine with `delivery` (the
    /// default when `nil`), once it heard.
    @MainActor private func screenThatHeard(delivery: APIEngine.Delivery?) async -> ScreenModel {
        let transport = MockTransport()
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#))
        let engine = delivery.map { APIEngine(transport: transport, delivery: $0) } ?? APIEngine(transport: transport)
        let manager = TestManager(engine: engine)
        let model = ScreenModel()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            manager.send(TestRequest("/a")) { result in
                model.shown = (try? result.get())?.value
                model.wasOnMainQueue = MainQueueMark.isCurrent
                continuation.resume()
            }
        }
        return model
    }

    @MainActor @Test func aCallerOnTheMainActorUpdatesItsStateThereWithTheDefaultDelivery() async {
        let model = await screenThatHeard(delivery: nil)
        #expect(model.shown == "a" && model.wasOnMainQueue)
    }

    @MainActor @Test func aMainActorCallerWithADeliveryOffTheMainQueueIsCalledOnTheMainActor() async {
        let model = await screenThatHeard(delivery: .queue(DispatchQueue(label: "d")))
        #expect(model.shown == "a" && model.wasOnMainQueue)
    }

    @MainActor @Test func aMainActorTestWithInlineDeliveryHearsInsideTheClocksAdvance() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#).after(0.3))
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let model = ScreenModel()
        manager.send(TestRequest("/a")) { result in model.shown = (try? result.get())?.value }
        clock.advance(by: 0.3)
        #expect(model.shown == "a")
    }

    @Test func aCallerOnAnotherActorIsCalledOnThatActor() async {
        let transport = MockTransport()
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#))
        let manager = TestManager(engine: APIEngine(transport: transport, delivery: .queue(DispatchQueue(label: "d"))))
        let counter = Counter()
        await counter.fetch(with: manager)
        #expect(await counter.values == ["a"])
    }

    @Test(arguments: [nil, "search"] as [String?])
    func manyThreadsSendingAndCancellingOnTheWorkQueuesHearEachTaskOnceAsItsStateSays(scope: String?) async {
        let transport = MockTransport()
        transport.stub(nil, "/a", .json(#"{"value":"a"}"#))
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, delivery: .queue(DispatchQueue(label: "completions")),
                execution: .concurrent(label: "completions")))
        let count = 200
        /// Each task with what its own closure heard.
        let sent = Locked<[(task: APITask<TestRequest>, heard: Locked<[String]>)]>([])
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let remaining = Locked(count)
            DispatchQueue.concurrentPerform(iterations: count) { index in
                let heard = Locked<[String]>([])
                let policy: APIConcurrencyPolicy = index % 2 == 0 ? .cancelOthers : .default
                let task = manager.send(TestRequest("/a", policy, scope: scope)) { result in
                    heard.withLock { $0.append((try? result.get()).map { "value \($0.value ?? "-")" } ?? "failed") }
                    if remaining.withLock({
                        $0 -= 1
                        return $0
                    }) == 0 {
                        continuation.resume()
                    }
                }
                if index % 7 == 0 { task.cancel() }
                sent.withLock { $0.append((task, heard)) }
            }
        }
        let all = sent.withLock { $0 }
        #expect(all.count == count)
        for (task, heard) in all {
            let lines = heard.withLock { $0 }
            #expect(lines.count == 1, "task \(task.identifier) heard \(lines)")
            #expect((task.state == .finished) == (lines.first == "value a"))
        }
    }

    @Test func aSharedFlightAndACachedCopyStillCallEachTasksClosureOnce() {
        let (manager, transport, clock) = inlineManager()
        transport.stub(.get, "/a", .json(#"{"value":"a"}"#).after(0.5))
        let outcomes = Outcomes()
        var request = TestRequest("/a")
        request.sharing = .always
        manager.send(request) { outcomes.record($0) }
        manager.send(request) { outcomes.record($0) }
        clock.advance(by: 0.5)
        #expect(outcomes.all == ["value a", "value a"])
        #expect(transport.records.count == 1, "one request on the wire for both")
    }

    @Test func withACacheOfBothOnlyTheFinalResponseIsGiven() throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.get, "/a", .json(#"{"value":"one"}"#, headers: ["Cache-Control": "max-age=0"]))
        let cache = APIResponseCache(disk: nil, clock: clock)
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline, cache: cache))
        var request = TestRequest("/a")
        request.cacheOption = .both
        manager.send(request)
        clock.runUntilIdle()
        transport.stub(.get, "/a", .json(#"{"value":"two"}"#).after(0.1))
        let outcomes = Outcomes()
        let recorder = EventRecorder()
        manager.delegate = recorder
        manager.send(request) { outcomes.record($0) }
        clock.advance(by: 0.1)
        #expect(recorder.events.contains { $0.contains("cached") }, "the cached copy reached the delegate")
        #expect(outcomes.all == ["value two"])
    }
}

@MainActor private final class ScreenModel {
    var shown: String?
    var wasOnMainQueue = false
}

private actor Counter {
    var values: [String] = []

    func fetch(with manager: TestManager) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            manager.send(TestRequest("/a")) { result in
                self.assertIsolated()
                self.values.append((try? result.get())?.value ?? "-")
                continuation.resume()
            }
        }
    }
}
