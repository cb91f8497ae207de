// What becomes of a durable task's record when the task ends (issue 42, item 2): decided once, by the
// scheduling machine's `end` (an action, compared event by event here), and carried out by the
// task's slot once the app has been told as well (`DurableSlot.Settling`, driven alone and at
// random), a removal told on the delivery queue on a work queue.
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

@Suite("A durable task's record settled at its end", .timeLimit(.minutes(1)))
struct DurableSettlingTests {
    typealias Settlement = DurableSlot.Settlement

    /// A durable task of `scope`'s line, sent to the machine.
    private static func durable(
        _ h: inout MachineHarness, scope: String? = "cart", stopsTheLine: Bool = false
    ) -> AnyAPITask {
        let task = AnyAPITask(
            identifier: UInt64(h.tasks.count + 1), policy: .durable, scope: scope,
            durableSlot: DurableSlot(isRestored: false, stopsTheLineWhenRefused: stopsTheLine))
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        return task
    }

    /// The task's current attempt ends with `error`, not retried.
    private static func fail(_ h: inout MachineHarness, _ task: AnyAPITask, with error: APIError) {
        let attempt = task.attemptNumber
        h.run { $0.attemptEnded(task, attempt: attempt, outcome: .failure(error), source: .network, retryDelay: nil) }
    }

    private static func status(_ code: Int) -> APIError {
        .unacceptableStatus(APIRawResponse(statusCode: code))
    }

    // MARK: The machine decides, once

    @Test(arguments: ["cart", nil] as [String?])
    func aDurableTaskThatFinishesHasItsRecordRemoved(scope: String?) {
        var h = MachineHarness()
        let task = Self.durable(&h, scope: scope)
        h.finish(task)
        #expect(Array(h.lastActions) == [.settleDurable(task, .remove)])
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aFinalRefusalOnALineThatStopsKeepsTheRecordAsRefusedAndStopsTheLine(scope: String?) {
        var h = MachineHarness()
        let refused = Self.durable(&h, scope: scope, stopsTheLine: true)
        let behind = Self.durable(&h, scope: scope, stopsTheLine: true)
        Self.fail(&h, refused, with: Self.status(422))
        #expect(Array(h.lastActions) == [.settleDurable(refused, .keepRefused)], "and nothing behind it starts")
        #expect(h.machine.lineIsStopped(scope))
        #expect(h.events(of: behind) == ["waiting"])
    }

    @Test(arguments: [422, 404, 401])
    func aFinalRefusalOnALineThatGoesOnRemovesTheRecord(code: Int) {
        var h = MachineHarness()
        let refused = Self.durable(&h, stopsTheLine: false)
        let behind = Self.durable(&h, stopsTheLine: false)
        Self.fail(&h, refused, with: Self.status(code))
        #expect(h.lastActions.settlements.map(\.settlement) == [.remove])
        #expect(!h.machine.lineIsStopped("cart"))
        #expect(h.events(of: behind) == ["waiting", "started 1"])
    }

    @Test(arguments: [503, 429, 409, 408])
    func aFailureThatIsNotAFinalRefusalRemovesTheRecordEvenWhereRefusalsStopTheLine(code: Int) {
        var h = MachineHarness()
        let task = Self.durable(&h, stopsTheLine: true)
        Self.fail(&h, task, with: Self.status(code))
        #expect(h.lastActions.settlements.map(\.settlement) == [.remove])
        #expect(!h.machine.lineIsStopped("cart"))
    }

    @Test func aCancelledDurableTaskHasItsRecordRemoved() {
        var h = MachineHarness()
        let task = Self.durable(&h)
        h.run { $0.cancel(tasks: [task], reason: .explicit) }
        #expect(h.lastActions.settlements.map(\.settlement) == [.remove])
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aDurableTaskCancelledWhileWaitingInLineHasItsRecordRemoved(scope: String?) {
        var h = MachineHarness()
        let running = Self.durable(&h, scope: scope)
        let waiting = Self.durable(&h, scope: scope)
        #expect(h.events(of: waiting) == ["waiting"])
        h.run { $0.cancel(tasks: [waiting], reason: .explicit) }
        #expect(h.lastActions.settlements.map(\.task) == [waiting])
        #expect(h.lastActions.settlements.map(\.settlement) == [.remove])
        #expect(h.events(of: running) == ["started 1"], "the running one goes on")
    }

    @Test func aDurableTaskCancelledWhileWaitingToRetryHasItsRecordRemoved() {
        var h = MachineHarness()
        let task = Self.durable(&h)
        h.failForRetry(task, delay: 5)
        #expect(h.lastActions.settlements.isEmpty, "not ended: it retries")
        h.run { $0.cancel(tasks: [task], reason: .explicit) }
        #expect(h.lastActions.settlements.map(\.settlement) == [.remove])
    }

    @Test func anEngineReleasedKeepsItsDurableTasksRecordsForTheNextLaunch() {
        var h = MachineHarness()
        let running = Self.durable(&h)
        let waiting = Self.durable(&h)
        h.run { $0.release() }
        #expect(h.lastActions.settlements.map(\.task) == [running, waiting])
        #expect(h.lastActions.settlements.map(\.settlement) == [.keepForRelaunch, .keepForRelaunch])
    }

    @Test func aTaskThatIsNotDurableSettlesNothing() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.finish(task)
        #expect(h.lastActions.settlements.isEmpty)
    }

    @Test func aTaskThatEndsAgainIsNotSettledAgain() {
        var h = MachineHarness()
        let task = Self.durable(&h)
        h.finish(task)
        h.run { $0.cancel(tasks: [task], reason: .explicit) }
        #expect(h.lastActions.settlements.isEmpty)
    }

    // MARK: The slot carries the decision out once the app was told

    @Test(arguments: [Settlement.remove, .keepRefused, .keepForRelaunch])
    func decidedThenToldSettlesOnTheTelling(settlement: Settlement) {
        var settling = DurableSlot.Settling()
        #expect(settling.decide(settlement) == nil, "the app has not been told yet")
        #expect(settling.told() == settlement)
        #expect(settling.phase == .settled)
    }

    @Test(arguments: [Settlement.remove, .keepRefused, .keepForRelaunch])
    func toldThenDecidedSettlesOnTheDecision(settlement: Settlement) {
        var settling = DurableSlot.Settling()
        #expect(settling.told() == nil, "nothing decided yet")
        #expect(settling.decide(settlement) == settlement)
        #expect(settling.phase == .settled)
    }

    @Test func aSecondDecisionOrTellingChangesNothing() {
        var settling = DurableSlot.Settling()
        #expect(settling.decide(.remove) == nil)
        #expect(settling.decide(.keepRefused) == nil, "the first decision stands")
        #expect(settling.phase == .waiting(decided: .remove, told: false))
        #expect(settling.told() == .remove)
        #expect(settling.told() == nil)
        #expect(settling.decide(.keepForRelaunch) == nil)
        var toldTwice = DurableSlot.Settling()
        #expect(toldTwice.told() == nil)
        #expect(toldTwice.told() == nil)
        #expect(toldTwice.decide(.keepRefused) == .keepRefused)
    }

    /// Random interleavings of decisions and tellings: a settlement comes out at most once, only once
    /// both have come, and it is the first decision.
    @Test func randomInterleavingsSettleOnceWithTheFirstDecision() {
        var random = SplitMix64(state: 42)
        let all: [Settlement] = [.remove, .keepRefused, .keepForRelaunch]
        for _ in 0..<2_000 {
            var settling = DurableSlot.Settling()
            var firstDecision: Settlement?
            var wasTold = false
            var settled: [Settlement] = []
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let result: Settlement?
                if Bool.random(using: &random) {
                    let settlement = all.randomElement(using: &random) ?? .remove
                    if firstDecision == nil { firstDecision = settlement }
                    result = settling.decide(settlement)
                } else {
                    wasTold = true
                    result = settling.told()
                }
                if let result {
                    #expect(firstDecision != nil && wasTold, "settled before both came")
                    #expect(result == firstDecision)
                    settled.append(result)
                }
            }
            #expect(settled.count <= 1)
            #expect(settled.count == ((firstDecision != nil && wasTold) ? 1 : 0))
        }
    }

    // MARK: The engine: a removal told on the delivery queue happens on a work queue

    @Test func aRecordToldOnTheDeliveryQueueIsRemovedOnAWorkQueueAfterTheDelegateReturned() throws {
        let folder = TemporaryFolder()
        let delivery = DispatchQueue(label: "settling.delivery")
        let lane = DispatchQueue(label: "settling.lane")
        var configuration = APIEngine.Configuration()
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/add", .json(#"{"value":"added"}"#))
        configuration.transport = transport
        configuration.clock = TestClock()
        configuration.delivery = .queue(delivery)
        configuration.execution = .queue(lane)
        configuration.durableStore = APIEngine.DurableStore(directory: folder.url)
        let manager = TestManager(engine: APIEngine(configuration: configuration))
        let recorder = EventRecorder()
        manager.delegate = recorder
        let seen = Locked<(inDelegate: [String]?, afterDelegate: [String]?)>((nil, nil))
        let afterDelegate = DispatchSemaphore(value: 0)
        recorder.onEvent = { line in
            guard line.hasSuffix("finished") else { return }
            seen.withLock { $0.inDelegate = recordNames(in: folder.url) }
            // The work queue holds the removal until the delivery queue's next block has looked.
            lane.suspend()
            delivery.async {
                seen.withLock { $0.afterDelegate = recordNames(in: folder.url) }
                lane.resume()
                afterDelegate.signal()
            }
        }
        manager.send(durableEdit("/add"))
        afterDelegate.wait()
        lane.sync {}
        #expect(seen.withLock { $0.inDelegate?.count } == 1, "the record is there while the app is told")
        #expect(
            seen.withLock { $0.afterDelegate?.count } == 1,
            "not removed on the delivery queue: it waits for the suspended work queue")
        #expect(recordNames(in: folder.url).isEmpty, "removed once the work queue ran")
    }
}
