// Bounded lines (issue 22, item 3): a line's length and a task's wait, each past its limit ending
// the task with an error that says which, with nothing sent. On the machine alone, then through a
// manager on a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

extension MachineHarness {
    /// Sends a task with a line limit.
    @discardableResult
    mutating func send(
        _ policy: APIConcurrencyPolicy, scope: String? = nil, limit: APIConcurrencyPolicy.LineLimit
    ) -> AnyAPITask {
        let task = AnyAPITask(identifier: UInt64(tasks.count + 1), policy: policy, scope: scope, lineLimit: limit)
        tasks.append(task)
        run { machine in machine.send(task, observed: false) }
        return task
    }
}

@Suite("Bounded lines", .timeLimit(.minutes(1)))
struct LineLimitTests {
    @Test(arguments: [nil, "s"] as [String?], [APIConcurrencyPolicy.waitUntilDone, .waitUntilDoneHighPriority])
    func aTaskThatWouldWaitBehindTooManyEndsAtOnce(scope: String?, policy: APIConcurrencyPolicy) {
        var h = MachineHarness()
        h.send(.default, scope: scope)
        h.send(.waitUntilDone, scope: scope)
        h.send(.waitUntilDone, scope: scope)
        let refused = h.send(policy, scope: scope, limit: APIConcurrencyPolicy.LineLimit(maxLength: 2))
        #expect(h.events(of: refused) == ["failed \(APIError.lineFull(maxLength: 2))"])
        #expect(h.machine.inFlightCount == 3)
        let admitted = h.send(policy, scope: scope, limit: APIConcurrencyPolicy.LineLimit(maxLength: 3))
        #expect(h.events(of: admitted) == ["waiting"])
        #expect(h.starts == ["1#1"], "nothing refused was started")
    }

    @Test func aNegativeLengthMeansTheTaskNeverWaits() {
        var h = MachineHarness()
        h.send(.default)
        let task = h.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxLength: -3))
        #expect(h.events(of: task) == ["failed \(APIError.lineFull(maxLength: 0))"])
        var fresh = MachineHarness()
        let alone = fresh.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxLength: 0))
        #expect(fresh.events(of: alone) == ["started 1"], "a task that does not wait is not limited")
    }

    @Test func aConflateTaskThatCouldNotWaitReplacesNothing() {
        var h = MachineHarness()
        h.send(.default)
        let waiting = h.send(.conflate)
        let refused = h.send(.conflate, limit: APIConcurrencyPolicy.LineLimit(maxLength: 0))
        #expect(h.events(of: refused) == ["failed \(APIError.lineFull(maxLength: 0))"])
        #expect(h.events(of: waiting) == ["waiting"], "still waiting")
        let replacing = h.send(.conflate, limit: APIConcurrencyPolicy.LineLimit(maxLength: 1))
        #expect(h.events(of: waiting).last == "failed cancelled(policy)")
        #expect(h.events(of: replacing) == ["waiting"], "it waits alone, within its limit")
    }

    @Test(arguments: [nil, "s"] as [String?])
    func aTaskThatWaitsTooLongLeavesTheLineAndTheOthersKeepTheirOrder(scope: String?) {
        var h = MachineHarness()
        let running = h.send(.default, scope: scope)
        let first = h.send(.waitUntilDone, scope: scope)
        let impatient = h.send(.waitUntilDone, scope: scope, limit: APIConcurrencyPolicy.LineLimit(maxWait: 5))
        #expect(Array(h.lastActions) == [.scheduleWaitLimit(impatient, after: 5)])
        let last = h.send(.waitUntilDone, scope: scope)
        let timer = NamedHandle()
        #expect(Array(h.run { $0.waitTimerSet(impatient, timer: timer) }) == [])
        #expect(Array(h.run { $0.waitLimitFired(impatient, maxWait: 5) }) == [])
        #expect(h.events(of: impatient) == ["waiting", "failed \(APIError.waitedTooLong(maxWait: 5))"])
        #expect(h.machine.inFlightTasks == [running, first, last])
        h.finish(running)
        h.finish(first)
        #expect(h.starts == ["1#1", "2#1", "4#1"], "the task that left was never started")
    }

    @Test func aTaskThatStartsInTimeHasItsWaitTimerCancelled() {
        var h = MachineHarness()
        let running = h.send(.default)
        let task = h.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxWait: 5))
        let timer = NamedHandle()
        h.run { $0.waitTimerSet(task, timer: timer) }
        h.finish(running)
        #expect(h.lastActions.contains(.cancel(SchedulingMachine.Handle(timer))))
        #expect(h.lastActions.contains(.start(task, attempt: 1)))
        #expect(Array(h.run { $0.waitLimitFired(task, maxWait: 5) }) == [], "a late timer does nothing")
        #expect(task.phase == .running)
    }

    @Test func cancellingAWaitingTaskCancelsItsWaitTimer() {
        var h = MachineHarness()
        h.send(.default)
        let task = h.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxWait: 5))
        let timer = NamedHandle()
        h.run { $0.waitTimerSet(task, timer: timer) }
        #expect(Array(h.run { $0.cancel(task, reason: .explicit) }) == [.cancel(.init(timer))])
        let late = NamedHandle()
        #expect(Array(h.run { $0.waitTimerSet(task, timer: late) }) == [.cancel(.init(late))])
    }

    @Test func aWaitLimitThatIsNotFiniteIsNoLimit() {
        var h = MachineHarness()
        h.send(.default)
        h.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxWait: .infinity))
        #expect(Array(h.lastActions) == [])
        h.send(.waitUntilDone, limit: APIConcurrencyPolicy.LineLimit(maxWait: -1))
        #expect(Array(h.lastActions) == [.scheduleWaitLimit(h.tasks[2], after: 0)], "a negative wait counts as 0")
    }

    // MARK: Through a manager on a virtual clock

    struct LimitedRequest: APIRequest {
        var url = testBaseURL
        var path: String
        var concurrencyPolicy: APIConcurrencyPolicy = .waitUntilDone
        var concurrencyScope: String? = "cart"
        var lineLimit: APIConcurrencyPolicy.LineLimit?
    }

    final class LimitedManager: APIManager {
        typealias Request = LimitedRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func aManagersWaitingRequestThatWaitsTooLongIsNeverSent() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json(#"{"value":"held"}"#).held())
        transport.stub(nil, "/next", .json(#"{"value":"next"}"#))
        let manager = LimitedManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        manager.delegate = recorder
        let blocker = manager.send(LimitedRequest(path: "/held"))
        let impatient = manager.send(
            LimitedRequest(path: "/next", lineLimit: APIConcurrencyPolicy.LineLimit(maxWait: 5)))
        let full = manager.send(LimitedRequest(path: "/next", lineLimit: APIConcurrencyPolicy.LineLimit(maxLength: 1)))
        #expect(describe(try #require(full.state.failure)) == "lineFull(1)")
        clock.advance(by: 4.9)
        #expect(impatient.state.name == "waiting")
        clock.advance(by: 0.1)
        #expect(impatient.state.name == "waitedTooLong(5.0)")
        #expect(recorder.events(of: impatient) == ["waiting", "failed waitedTooLong(5.0)"])
        transport.releaseAll()
        #expect(blocker.state.name == "finished")
        #expect(transport.records.map(\.path) == ["/held"], "neither limited request was sent")
        #expect(clock.pendingTimerCount == 0, "no timer left behind")
    }

    @Test func anAwaitedRequestPastItsLineLimitThrowsTheTypedError() async throws {
        let transport = MockTransport()
        transport.stub(nil, "/held", MockTransport.Reply.json(#"{"value":"held"}"#).held())
        let manager = LimitedManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        manager.send(LimitedRequest(path: "/held"))
        await #expect(throws: APIError.self) {
            try await manager.response(
                for: LimitedRequest(path: "/x", lineLimit: APIConcurrencyPolicy.LineLimit(maxLength: 0)))
        }
        transport.releaseAll()
    }
}

extension AnyAPITask.State {
    /// The error the task failed with; `nil` unless it failed.
    var failure: APIError? {
        if case .failed(let error) = self { return error }
        return nil
    }
}
