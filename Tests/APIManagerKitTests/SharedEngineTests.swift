import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

/// Managers sharing one engine: each keeps its own `cancelAll()`, `inFlightTasks` and delegate.
@Suite("Managers sharing an engine", .timeLimit(.minutes(1)))
struct SharedEngineTests {
    private func twoManagers() -> (Harness, TestManager, EventRecorder) {
        let harness = Harness()
        let other = TestManager(engine: harness.manager.engine)
        let otherRecorder = EventRecorder()
        other.delegate = otherRecorder
        return (harness, other, otherRecorder)
    }

    @Test func cancelAllCancelsOnlyTheCallersTasks() {
        let (h, other, _) = twoManagers()
        let mine = (0..<2).map { _ in h.send(TestRequest("/held")) }
        let theirs = (0..<2).map { _ in other.send(TestRequest("/held")) }
        h.manager.cancelAll()
        #expect(mine.allSatisfy { $0.state.name == "cancelled(explicit)" })
        #expect(theirs.allSatisfy { $0.state.name == "running" })
        h.transport.releaseAll()
        #expect(theirs.allSatisfy { $0.state.name == "finished" })
    }

    @Test func cancelTasksWhereSeesOnlyTheCallersTasks() {
        let (h, other, _) = twoManagers()
        let mine = h.send(TestRequest("/held"))
        let theirs = other.send(TestRequest("/held"))
        let seen = Locked<[UInt64]>([])
        h.manager.cancelTasks { task in
            seen.withLock { $0.append(task.identifier) }
            return true
        }
        #expect(seen.withLock { $0 } == [mine.identifier])
        #expect(theirs.state.name == "running")
    }

    /// Two managers' tasks wait in one line of a named scope: one manager's `cancelAll()` ends its
    /// own, running or waiting, and the other's line goes on in order.
    @Test func cancelAllLeavesTheOtherManagersLineInANamedScopeInOrder() {
        let (h, other, otherRecorder) = twoManagers()
        let mine = h.send(TestRequest("/held", .waitUntilDone, scope: "cart"))
        let theirs = (0..<2).map { _ in other.send(TestRequest("/held", .waitUntilDone, scope: "cart")) }
        let mineWaiting = h.send(TestRequest("/held", .waitUntilDone, scope: "cart"))
        #expect(theirs.map(\.state.name) == ["waiting", "waiting"])
        h.manager.cancelAll()
        #expect([mine, mineWaiting].allSatisfy { $0.state.name == "cancelled(explicit)" })
        #expect(theirs.map(\.state.name) == ["running", "waiting"])
        h.transport.release(path: "/held")
        #expect(theirs.map(\.state.name) == ["finished", "running"])
        h.transport.release(path: "/held")
        #expect(theirs.allSatisfy { $0.state.name == "finished" })
        #expect(otherRecorder.events.filter { $0.hasSuffix("start 1") }.count == 2)
        #expect(!h.recorder.events.contains { $0.hasPrefix("\(theirs[0].identifier) ") })
    }

    @Test func inFlightTasksListsOnlyTheManagersOwn() {
        let (h, other, _) = twoManagers()
        let mine = h.send(TestRequest("/held"))
        let theirs = (0..<2).map { _ in other.send(TestRequest("/held", .waitUntilDone, scope: "cart")) }
        #expect(h.manager.inFlightTasks.map(\.identifier) == [mine.identifier])
        #expect(other.inFlightTasks.map(\.identifier) == theirs.map(\.identifier))
        #expect(h.manager.engine.inFlightCount == 3)
    }

    @Test func eachManagerHasItsOwnDelegate() {
        let (h, other, otherRecorder) = twoManagers()
        #expect(h.manager.delegate === h.recorder)
        #expect(other.delegate === otherRecorder)
        let mine = h.send(TestRequest("/ok"))
        let theirs = other.send(TestRequest("/ok"))
        #expect(h.recorder.events == ["\(mine.identifier) start 1", "\(mine.identifier) finished"])
        #expect(otherRecorder.events == ["\(theirs.identifier) start 1", "\(theirs.identifier) finished"])
        other.delegate = nil
        other.send(TestRequest("/ok"))
        #expect(h.manager.delegate === h.recorder)
        #expect(otherRecorder.events.count == 2)
    }

    @Test func aReleasedManagersDelegateSlotIsForgotten() {
        let h = Harness()
        weak var releasedManager: TestManager?
        do {
            let transient = TestManager(engine: h.manager.engine)
            transient.delegate = EventRecorder()  // released at once: held weakly
            releasedManager = transient
            #expect(transient.delegate == nil)
        }
        #expect(releasedManager == nil)
        #expect(h.manager.delegate === h.recorder)
    }

    /// Several managers on several threads send, cancel and list at once; each `cancelAll()` ends
    /// exactly its own tasks.
    @Test(.timeLimit(.minutes(1)))
    func managersOnManyThreadsKeepTheirTasksApart() {
        let h = Harness()
        h.transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        let managers = (0..<4).map { _ in TestManager(engine: h.manager.engine) }
        let sent = Locked<[Int: [AnyAPITask]]>([:])
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for _ in 0..<25 {
                let task = managers[index].send(TestRequest("/held"))
                sent.withLock { $0[index, default: []].append(task) }
            }
            #expect(managers[index].inFlightTasks.count == 25)
        }
        DispatchQueue.concurrentPerform(iterations: 2) { index in managers[index].cancelAll() }
        let tasks = sent.withLock { $0 }
        for index in 0..<2 {
            #expect(tasks[index]?.allSatisfy { $0.state.name == "cancelled(explicit)" } == true)
        }
        for index in 2..<4 {
            #expect(tasks[index]?.allSatisfy { $0.state.name == "running" } == true)
            #expect(managers[index].inFlightTasks.count == 25)
        }
    }
}
