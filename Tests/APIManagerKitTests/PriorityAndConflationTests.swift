// Priorities in the line and the conflate policy (issue 22, items 1 and 7): on the scheduling machine
// alone, and through a manager on a mock transport.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("Priorities and conflation", .timeLimit(.minutes(1)))
struct PriorityAndConflationTests {
    // MARK: The machine alone

    @Test(arguments: [nil, "s"] as [String?])
    func waitingTasksStartByPriorityThenInSendingOrder(scope: String?) {
        var h = MachineHarness()
        let running = h.send(.default, scope: scope)
        let a = h.send(.waitUntilDone, scope: scope)
        let b = h.send(.waitUntilDone, scope: scope, priority: 5)
        let c = h.send(.waitUntilDone, scope: scope, priority: -1)
        let d = h.send(.waitUntilDone, scope: scope, priority: 5)
        let e = h.send(.waitUntilDone, scope: scope, priority: 2)
        #expect(h.machine.inFlightTasks == [running, b, d, e, a, c])
        var started: [AnyAPITask] = []
        var current = running
        for _ in 0..<5 {
            h.finish(current)
            guard let next = h.machine.inFlightTasks.first else { break }
            started.append(next)
            current = next
        }
        #expect(started == [b, d, e, a, c], "higher first, equal priorities in sending order")
    }

    @Test func highPriorityTasksStillGoFirstNewestFirstWhateverTheirPriority() {
        var h = MachineHarness()
        let running = h.send(.default)
        let urgent = h.send(.waitUntilDone, priority: 100)
        let detail1 = h.send(.waitUntilDoneHighPriority, priority: -5)
        let detail2 = h.send(.waitUntilDoneHighPriority)
        #expect(h.machine.inFlightTasks == [running, detail2, detail1, urgent])
    }

    @Test func cancellingAPrioritizedWaitingTaskKeepsTheOthersInOrder() {
        var h = MachineHarness()
        let running = h.send(.default)
        let a = h.send(.waitUntilDone, priority: 3)
        let b = h.send(.waitUntilDone, priority: 3)
        let c = h.send(.waitUntilDone, priority: 1)
        h.run { $0.cancel(a, reason: .explicit) }
        h.run { $0.cancel(b, reason: .explicit) }
        let d = h.send(.waitUntilDone, priority: 3)  // the emptied priority comes back
        #expect(h.machine.inFlightTasks == [running, d, c])
        #expect(h.machine.inFlightCount == 3)
    }

    @Test func aPrioritizedHeadStillWaitsForEveryTaskRunningWhenItWasSent() {
        // The head rule is unchanged: a prioritized head still waits for every task that was running
        // when it was sent.
        var h = MachineHarness()
        let first = h.send(.default)
        let second = h.send(.default)
        let queued = h.send(.waitUntilDone, priority: 9)
        h.finish(second)
        #expect(h.events(of: queued) == ["waiting"])
        h.finish(first)
        #expect(h.events(of: queued) == ["waiting", "started 1"])
    }

    @Test(arguments: [nil, "autosave"] as [String?])
    func conflationKeepsOneRunningAndTheNewestWaiting(scope: String?) {
        var h = MachineHarness()
        let save1 = h.send(.conflate, scope: scope)
        let save2 = h.send(.conflate, scope: scope)
        let save3 = h.send(.conflate, scope: scope)
        let save4 = h.send(.conflate, scope: scope)
        #expect(h.machine.inFlightTasks == [save1, save4], "one runs, one waits")
        #expect(h.events(of: save2) == ["waiting", "failed cancelled(policy)"])
        #expect(h.events(of: save3) == ["waiting", "failed cancelled(policy)"])
        h.finish(save1)
        #expect(h.events(of: save4) == ["waiting", "started 1"])
        #expect(h.starts == ["1#1", "4#1"], "the replaced versions were never sent")
    }

    @Test func conflationReplacesWaitingTasksOfOtherPoliciesToo() {
        var h = MachineHarness()
        let running = h.send(.default)
        let cart = h.send(.waitUntilDone)
        let detail = h.send(.waitUntilDoneHighPriority)
        let save = h.send(.conflate)
        #expect(h.events(of: cart).last == "failed cancelled(policy)")
        #expect(h.events(of: detail).last == "failed cancelled(policy)")
        #expect(h.machine.inFlightTasks == [running, save])
    }

    @Test func aWaitingConflateTaskIsTreatedByOthersAsAnyWaitingTask() {
        var h = MachineHarness()
        h.send(.default)
        let save = h.send(.conflate)
        let queued = h.send(.waitUntilDone)
        #expect(h.machine.inFlightTasks.suffix(2) == [save, queued], "waitUntilDone joins behind it")
        let ignored = h.send(.ignoreCurrent)
        #expect(h.events(of: ignored) == ["failed ignored"])
        let search = h.send(.cancelOthers)
        #expect(h.events(of: save).last == "failed cancelled(policy)")
        #expect(h.machine.inFlightTasks == [search])
    }

    // MARK: Through a manager

    @Test func aManagerSendsOnlyTheNewestAutosave() async throws {
        let harness = Harness()
        harness.transport.stub(nil, "/save", MockTransport.Reply.json(#"{"value":"saved"}"#).held())
        var saves: [APITask<TestRequest>] = []
        for _ in 0..<4 { saves.append(harness.send(TestRequest("/save", .conflate, scope: "doc"))) }
        #expect(harness.records("/save").count == 1, "only the first went out")
        harness.transport.releaseAll()
        #expect(harness.records("/save").count == 2, "then only the newest")
        harness.transport.releaseAll()
        #expect(saves.map(\.state.name) == ["finished", "cancelled(policy)", "cancelled(policy)", "finished"])
    }

    @Test func aManagerStartsWaitingRequestsByPriority() throws {
        let harness = Harness()
        let blocker = harness.send(TestRequest("/held", .waitUntilDone))
        var low = TestRequest("/ok", .waitUntilDone)
        low.path = "/low"
        var high = TestRequest("/ok", .waitUntilDone)
        high.path = "/high"
        high.priority = 10
        harness.transport.stub(nil, "/low", .json(#"{"value":"low"}"#))
        harness.transport.stub(nil, "/high", .json(#"{"value":"high"}"#))
        harness.send(low)
        harness.send(high)
        harness.transport.releaseAll()
        #expect(blocker.state.name == "finished")
        let order = harness.transport.records.map(\.path).filter { $0 != "/held" }
        #expect(order == ["/high", "/low"])
    }
}
