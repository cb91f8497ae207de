// The limited policy (issue 22, item 2, within a scope): at most N tasks of the scope run, the rest
// wait in line by priority. On the machine alone, then through a manager.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

extension MachineHarness {
    @discardableResult
    mutating func sendLimited(_ limit: Int, scope: String? = nil, priority: Int = 0) -> AnyAPITask {
        let task = AnyAPITask(
            identifier: UInt64(tasks.count + 1), policy: .limited, scope: scope, priority: priority,
            concurrencyLimit: limit)
        tasks.append(task)
        run { machine in machine.send(task, observed: false) }
        return task
    }
}

@Suite("The limited policy", .timeLimit(.minutes(1)))
struct LimitedPolicyTests {
    @Test(arguments: [nil, "gallery"] as [String?])
    func atMostTheLimitRunsAndTheRestStartAsOthersEnd(scope: String?) {
        var h = MachineHarness()
        let tasks = (0..<5).map { _ in h.sendLimited(2, scope: scope) }
        #expect(h.starts == ["1#1", "2#1"])
        #expect(tasks[2...].allSatisfy { $0.phase == .waiting })
        h.finish(tasks[1])
        #expect(h.starts == ["1#1", "2#1", "3#1"], "one ends, the head starts")
        h.finish(tasks[0])
        h.finish(tasks[2])
        #expect(h.starts == ["1#1", "2#1", "3#1", "4#1", "5#1"])
        #expect(h.events(of: tasks[4]) == ["waiting", "started 1"])
    }

    @Test func theLineStartsByPriority() {
        var h = MachineHarness()
        let running = h.sendLimited(1)
        let low = h.sendLimited(1, priority: -1)
        let normal = h.sendLimited(1)
        let high = h.sendLimited(1, priority: 3)
        #expect(h.machine.inFlightTasks == [running, high, normal, low])
        h.finish(running)
        #expect(h.events(of: high) == ["waiting", "started 1"])
    }

    @Test func aRetryingTaskCountsAsRunning() {
        var h = MachineHarness()
        let flaky = h.sendLimited(1)
        let next = h.sendLimited(1)
        h.failForRetry(flaky, delay: 2)
        #expect(next.phase == .waiting, "the retry keeps its place")
        h.run { $0.retryTimerFired(flaky, attempt: 1) }
        h.finish(flaky)
        #expect(next.phase == .running)
    }

    @Test func otherPoliciesRunningCountTowardsTheLimit() {
        var h = MachineHarness()
        h.send(.default)
        h.send(.default)
        let limited = h.sendLimited(2)
        #expect(limited.phase == .waiting, "two run already")
        h.finish(h.tasks[0])
        #expect(limited.phase == .running)
    }

    @Test func aNewLimitedTaskDoesNotPassTheLine() {
        var h = MachineHarness()
        let running = h.send(.default)
        let cart = h.send(.waitUntilDone)  // waits for the running task
        let limited = h.sendLimited(4)
        #expect(limited.phase == .waiting, "someone waits: it joins the line instead of starting")
        #expect(h.machine.inFlightTasks == [running, cart, limited])
        h.finish(running)
        #expect(cart.phase == .running)
        #expect(limited.phase == .running, "the limited head needs only fewer than 4 running")
    }

    @Test func aLimitBelowOneCountsAsOne() {
        var h = MachineHarness()
        let first = h.sendLimited(0)
        let second = h.sendLimited(-2)
        #expect(first.phase == .running && second.phase == .waiting)
        #expect(first.bag.concurrencyLimit == 1)
    }

    @Test func ignoreCurrentAndCancelOthersTreatLimitedTasksAsAnyOthers() {
        var h = MachineHarness()
        let running = h.sendLimited(1)
        let waiting = h.sendLimited(1)
        let pull = h.send(.ignoreCurrent)
        #expect(h.events(of: pull) == ["failed ignored"])
        let search = h.send(.cancelOthers)
        #expect(h.events(of: running).last == "failed cancelled(policy)")
        #expect(h.events(of: waiting).last == "failed cancelled(policy)")
        #expect(h.machine.inFlightTasks == [search])
    }

    // MARK: Through a manager

    struct ThumbnailRequest: APIRequest {
        var url = testBaseURL
        var path: String
        var concurrencyPolicy: APIConcurrencyPolicy { .limited }
        var concurrencyLimit: Int { 4 }
    }

    final class Gallery: APIManager {
        typealias Request = ThumbnailRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func aGalleryOfTwentyThumbnailsNeverHasMoreThanFourOnTheWire() {
        let transport = MockTransport()
        for index in 0..<20 {
            transport.stub(nil, "/thumb/\(index)", MockTransport.Reply.json(#"{"value":"t"}"#).held())
        }
        let gallery = Gallery(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let tasks = (0..<20).map { gallery.send(ThumbnailRequest(path: "/thumb/\($0)")) }
        var most = 0
        while transport.pendingCount > 0 {
            most = max(most, transport.pendingCount)
            _ = transport.release()
        }
        #expect(most == 4)
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
        #expect(transport.records.map(\.path) == (0..<20).map { "/thumb/\($0)" }, "in sending order")
    }
}
