// The scheduling machine alone: no transport, no clock, no engine. Each test sends task records
// and feeds attempt ends, and reads back the actions and events the machine produced.
import Foundation
import Testing

@testable import APIManagerKit

extension AnyAPITask {
    /// The lifecycle's stage, without its payload, for tests.
    enum Phase { case created, waiting, running, waitingForRetry, waitingForConnectivity, ended }

    var phase: Phase {
        switch record.lifecycle {
        case .created: return .created
        case .waiting: return .waiting
        case .running: return .running
        case .waitingForRetry: return .waitingForRetry
        case .waitingForConnectivity: return .waitingForConnectivity
        case .ended: return .ended
        }
    }

    var attemptNumber: Int { record.attemptCount }
}

/// A machine and the tasks sent to it, with helpers that read its decisions.
struct MachineHarness {
    var machine = SchedulingMachine()
    var tasks: [AnyAPITask] = []
    /// Every event delivered so far, as `"3 started 1"`, `"2 failed cancelled(policy)"`.
    var events: [String] = []
    /// The attempts started so far, as `"3#1"`.
    var starts: [String] = []
    var cancellations = 0
    /// The actions of the last event.
    var lastActions = SchedulingMachine.Actions()

    @discardableResult
    mutating func send(_ policy: APIConcurrencyPolicy, scope: String? = nil, priority: Int = 0) -> AnyAPITask {
        let task = AnyAPITask(identifier: UInt64(tasks.count + 1), policy: policy, scope: scope, priority: priority)
        tasks.append(task)
        run { machine in machine.send(task, observed: false) }
        return task
    }

    /// The engine made the task's attempt `attempt` with `handle` as its link: how its retry policy
    /// counts it, `nil` when it is not the task's current attempt.
    @discardableResult
    mutating func start(_ task: AnyAPITask, attempt: Int, handle: any APICancellable) -> Int? {
        machine.attemptStarted(task, attempt: attempt, handle: handle)
    }

    /// The task's current attempt finishes with a response.
    mutating func finish(_ task: AnyAPITask) {
        let attempt = task.attemptNumber
        run { machine in
            machine.attemptEnded(
                task, attempt: attempt, outcome: .success(AnyAPITask.BuiltResponse { _ in }), source: .network,
                retryDelay: nil)
        }
    }

    /// The task's current attempt fails and is to be retried after `delay`.
    mutating func failForRetry(_ task: AnyAPITask, delay: Double) {
        let attempt = task.attemptNumber
        run { machine in
            machine.attemptEnded(
                task, attempt: attempt, outcome: .failure(.transport(underlying: URLError(.timedOut))),
                source: .network, retryDelay: delay)
        }
    }

    mutating func cancelAll() {
        let inFlight = machine.inFlightTasks
        run { machine in machine.cancel(tasks: inFlight, reason: .explicit) }
    }

    /// Runs one event; returns its actions (also kept in `lastActions`), after delivering the
    /// events it queued.
    @discardableResult
    mutating func run(
        _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions
    ) -> SchedulingMachine.Actions {
        let actions = event(&machine)
        lastActions = actions
        for action in actions {
            switch action {
            case .start(let task, let attempt): starts.append("\(task.identifier)#\(attempt)")
            case .cancel: cancellations += 1
            default: break
            }
        }
        defer { deliver() }
        return actions
    }

    /// Takes every queued event, as a delivery run does.
    mutating func deliver() {
        var batch: EventOutbox.Batch = []
        while machine.takeEvents(into: &batch) {
            events += batch.map { "\($0.0.identifier) \(Self.describe($0.1))" }
            batch.removeAll(keepingCapacity: true)
        }
    }

    static func describe(_ event: AnyAPITask.Event) -> String {
        switch event {
        case .waiting: return "waiting"
        case .waitingForNetwork: return "waitingForNetwork"
        case .started(let attempt): return "started \(attempt)"
        case .progress(let progress): return "\(progress)"
        case .willRetry(let delay, _): return "retry \(delay)"
        case .cachedResponse: return "cached"
        case .finished: return "finished"
        case .failed(let error): return "failed \(describeError(error))"
        }
    }

    static func describeError(_ error: APIError) -> String {
        switch error {
        case .cancelled(let reason): return "cancelled(\(reason))"
        case .ignored: return "ignored"
        default: return "\(error)"
        }
    }

    func events(of task: AnyAPITask) -> [String] {
        events.filter { $0.hasPrefix("\(task.identifier) ") }.map { String($0.dropFirst("\(task.identifier) ".count)) }
    }
}

@Suite("Scheduling machine: the interaction table", .timeLimit(.minutes(1)))
struct SchedulingMachineTests {
    /// What the scope holds when the new task is sent.
    enum Holding: CaseIterable { case nothing, running, runningAndLine }

    /// Prepares the scope, sends a task under `policy`, and says what became of it.
    static func outcome(of policy: APIConcurrencyPolicy, when holding: Holding, scope: String?) -> (
        MachineHarness, AnyAPITask
    ) {
        var h = MachineHarness()
        switch holding {
        case .nothing: break
        case .running: h.send(.default, scope: scope)
        case .runningAndLine:
            h.send(.default, scope: scope)
            h.send(.waitUntilDone, scope: scope)
        }
        let task = h.send(policy, scope: scope)
        return (h, task)
    }

    @Test(arguments: APIConcurrencyPolicy.allCases.filter { !$0.isPaced || $0 == .throttle }, [nil, "s"] as [String?])
    func everyPolicyButDebounceStartsAtOnceInAnIdleScope(policy: APIConcurrencyPolicy, scope: String?) {
        let (h, task) = Self.outcome(of: policy, when: .nothing, scope: scope)
        #expect(h.events(of: task) == ["started 1"])
        #expect(h.starts == ["1#1"])
    }

    @Test(arguments: [nil, "s"] as [String?])
    func aDebouncedTaskWaitsItsQuietIntervalEvenInAnIdleScope(scope: String?) {
        var (h, task) = Self.outcome(of: .debounce, when: .nothing, scope: scope)
        #expect(h.events(of: task) == ["waiting"])
        #expect(Array(h.lastActions) == [.scheduleQuietEnd(task, after: 0.3)])
        h.run { $0.quietEnded(task) }
        #expect(h.events(of: task) == ["waiting", "started 1"])
    }

    @Test(arguments: [nil, "s"] as [String?])
    func whileTasksRun(scope: String?) {
        var (h, task) = Self.outcome(of: .default, when: .running, scope: scope)
        #expect(h.events(of: task) == ["started 1"], "default starts alongside")
        (h, task) = Self.outcome(of: .cancelOthers, when: .running, scope: scope)
        #expect(h.events(of: h.tasks[0]) == ["started 1", "failed cancelled(policy)"])
        #expect(h.events(of: task) == ["started 1"])
        #expect(h.cancellations == 0, "the running attempt had no transport handle yet")
        (h, task) = Self.outcome(of: .waitUntilDone, when: .running, scope: scope)
        #expect(h.events(of: task) == ["waiting"])
        (h, task) = Self.outcome(of: .waitUntilDoneHighPriority, when: .running, scope: scope)
        #expect(h.events(of: task) == ["waiting"])
        (h, task) = Self.outcome(of: .ignoreCurrent, when: .running, scope: scope)
        #expect(h.events(of: task) == ["failed ignored"])
        (h, task) = Self.outcome(of: .conflate, when: .running, scope: scope)
        #expect(h.events(of: task) == ["waiting"])
        h.finish(h.tasks[0])
        #expect(h.events(of: task) == ["waiting", "started 1"], "starts when the running task has ended")
        (h, task) = Self.outcome(of: .limited, when: .running, scope: scope)
        #expect(h.events(of: task) == ["started 1"], "one runs, fewer than its limit of 4: starts alongside")
        (h, task) = Self.outcome(of: .durable, when: .running, scope: scope)
        #expect(h.events(of: task) == ["waiting"])
        h.finish(h.tasks[0])
        #expect(h.events(of: task) == ["waiting", "started 1"], "durable: starts when the running task has ended")
    }

    @Test(arguments: [nil, "s"] as [String?])
    func whileTasksRunAndALineWaits(scope: String?) {
        var (h, task) = Self.outcome(of: .default, when: .runningAndLine, scope: scope)
        #expect(h.events(of: task) == ["started 1"])
        h.finish(h.tasks[0])
        #expect(
            h.events(of: h.tasks[1]) == ["waiting", "started 1"], "the line does not wait for a later default task")

        (h, task) = Self.outcome(of: .cancelOthers, when: .runningAndLine, scope: scope)
        #expect(h.events(of: h.tasks[0]).last == "failed cancelled(policy)")
        #expect(h.events(of: h.tasks[1]) == ["waiting", "failed cancelled(policy)"])
        #expect(h.events(of: task) == ["started 1"])
        #expect(h.machine.inFlightTasks == [task])

        (h, task) = Self.outcome(of: .waitUntilDone, when: .runningAndLine, scope: scope)
        #expect(h.machine.inFlightTasks == [h.tasks[0], h.tasks[1], task], "joins the end of the line")

        (h, task) = Self.outcome(of: .waitUntilDoneHighPriority, when: .runningAndLine, scope: scope)
        #expect(h.machine.inFlightTasks == [h.tasks[0], task, h.tasks[1]], "goes to the front of the line")

        (h, task) = Self.outcome(of: .ignoreCurrent, when: .runningAndLine, scope: scope)
        #expect(h.events(of: task) == ["failed ignored"])

        (h, task) = Self.outcome(of: .conflate, when: .runningAndLine, scope: scope)
        #expect(h.events(of: h.tasks[1]) == ["waiting", "failed cancelled(policy)"], "the waiting task is replaced")
        #expect(h.events(of: h.tasks[0]) == ["started 1"], "the running task goes on")
        #expect(h.machine.inFlightTasks == [h.tasks[0], task])
        #expect(h.starts == ["1#1"], "the replaced task was never started")

        (h, task) = Self.outcome(of: .limited, when: .runningAndLine, scope: scope)
        #expect(h.machine.inFlightTasks == [h.tasks[0], h.tasks[1], task], "joins the line: someone waits")

        (h, task) = Self.outcome(of: .durable, when: .runningAndLine, scope: scope)
        #expect(h.machine.inFlightTasks == [h.tasks[0], h.tasks[1], task], "durable: joins the end of the line")
        h.finish(h.tasks[0])
        #expect(h.events(of: task) == ["waiting"], "and waits for the line's head")
        h.finish(h.tasks[1])
        #expect(h.events(of: task) == ["waiting", "started 1"])
    }

    @Test func theHeadStartsOnlyWhenEveryTaskSentBeforeItHasEnded() {
        var h = MachineHarness()
        let first = h.send(.default)
        let second = h.send(.default)
        let queued = h.send(.waitUntilDone)
        h.finish(second)
        #expect(h.events(of: queued) == ["waiting"])
        h.finish(first)
        #expect(h.events(of: queued) == ["waiting", "started 1"])
    }

    @Test func aRetryKeepsItsTaskInPlaceAndTheLineWaits() {
        var h = MachineHarness()
        let flaky = h.send(.default)
        let queued = h.send(.waitUntilDone)
        h.failForRetry(flaky, delay: 2)
        #expect(flaky.phase == .waitingForRetry)
        #expect(h.events(of: queued) == ["waiting"])
        #expect(h.machine.inFlightCount == 2)
        h.run { machine in machine.retryTimerFired(flaky, attempt: 1) }
        #expect(h.events(of: flaky) == ["started 1", "retry 2.0", "started 2"])
        h.finish(flaky)
        #expect(h.events(of: queued) == ["waiting", "started 1"])
    }

    @Test func theTerminalEventComesBeforeTheStartOfTheTaskThatTakesItsPlace() {
        var h = MachineHarness()
        let first = h.send(.waitUntilDone)
        let second = h.send(.waitUntilDone)
        h.finish(first)
        let finished = h.events.firstIndex(of: "\(first.identifier) finished")
        let started = h.events.firstIndex(of: "\(second.identifier) started 1")
        #expect(finished != nil && started != nil && finished! < started!)
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func cancellingEveryTaskStartsNoneOfTheLine(scope: String?) {
        var h = MachineHarness()
        for _ in 0..<3 { h.send(.waitUntilDone, scope: scope) }
        h.cancelAll()
        #expect(h.starts == ["1#1"], "only the first was ever started")
        #expect(h.machine.inFlightCount == 0)
    }

    @Test func aDeadlineEndsTheTaskWithItsAttemptCount() {
        var h = MachineHarness()
        let task = h.send(.default)
        h.run { machine in machine.deadlineFired(task, deadline: 5) }
        #expect(h.events(of: task) == ["started 1", "failed \(APIError.timedOut(deadline: 5, attempts: 1))"])
    }

    @Test func releasingEndsEveryTaskWithoutEvents() {
        var h = MachineHarness()
        h.send(.default)
        h.send(.waitUntilDone, scope: "s")
        let before = h.events.count
        h.run { machine in machine.release() }
        #expect(h.events.count == before)
        #expect(h.machine.inFlightCount == 0)
        #expect(h.tasks.allSatisfy { $0.phase == .ended })
    }
}
