/// The scheduling rules: concurrency policies, lines, retries, deadlines and cancellation, as a value
/// whose events change it and return the actions to perform.
///
/// Events: ``send(_:observed:into:)``, ``cancel(_:reason:into:)``, ``cancel(tasks:reason:into:)``,
/// ``claimSend(_:attempt:)``, ``track(_:for:attempt:)``, ``claimReplay(_:attempt:)``,
/// ``attemptSent(_:attempt:handle:into:)``,
/// ``attemptEnded(_:attempt:outcome:source:retryDelay:into:)``,
/// ``cachedResponse(_:attempt:response:terminal:into:)``, ``retryTimerFired(_:attempt:into:)``,
/// ``deadlineFired(_:deadline:into:)`` and ``release(into:)``. Actions: start an attempt, cancel a
/// transport request or a timer, schedule a timer, tell an observer, deliver the events it queued.
///
/// The machine never calls out (no transport, clock, hook or delegate), so the engine calls it
/// while holding its lock and performs the actions after unlocking, and tests drive it alone. The
/// scopes and lines are the machine's; what each task went through (phase, attempt, timers) is
/// kept on the task record, written only by the machine.
struct SchedulingMachine {
    /// What a transition decided to do once the lock is released.
    struct Actions {
        var cancellations: [any APICancellable] = []
        var observations: [(AnyAPITask, AnyAPITask.Observation)] = []
        /// Attempts to start, nearly always one, kept inline so that a send does not allocate.
        var starts = InlineList<(task: AnyAPITask, attempt: Int)>()
        var retries: [(task: AnyAPITask, attempt: Int, delay: Double)] = []
        var deadlines: [(task: AnyAPITask, deadline: Double)] = []
        /// Events were queued while none were waiting: their delivery is to be scheduled.
        var deliverEvents = false
    }

    private let defaultScope = ScopeState(key: nil)
    private var namedScopes: [String: ScopeState] = [:]
    private var nextSequence: UInt64 = 0
    /// Events waiting to be delivered, in order.
    private var outbox: [(AnyAPITask, AnyAPITask.Event)] = []
    /// An empty buffer with capacity, kept for the next batch (see ``takeEvents(into:)``).
    private var spareOutbox: [(AnyAPITask, AnyAPITask.Event)] = []
    private var isDeliveryScheduled = false

    // MARK: Reading

    /// The number of tasks in flight: waiting, running or waiting for a retry.
    var inFlightCount: Int {
        namedScopes.values.reduce(Self.count(of: defaultScope)) { $0 + Self.count(of: $1) }
    }

    private static func count(of scope: ScopeState) -> Int {
        scope.started.count + scope.startedFromLine.count + scope.line.count
    }

    /// The in-flight tasks: per scope, the running ones, then the line from head to tail.
    var inFlightTasks: [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        for scope in [defaultScope] + Array(namedScopes.values) {
            tasks += scope.started.snapshot()
            tasks += scope.startedFromLine.snapshot()
            tasks += scope.line.snapshot()
        }
        return tasks
    }

    /// Whether `attempt` is the task's current, running attempt.
    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        task.phase == .running && task.attemptNumber == attempt
    }

    // MARK: Events

    /// A task is sent: its policy starts it, queues it, ignores it, or (cancelled before it was
    /// sent) ends it.
    mutating func send(_ task: AnyAPITask, observed: Bool, into actions: inout Actions) {
        guard task.phase == .created else { return }
        task.isObserved = observed
        nextSequence += 1
        task.sequence = nextSequence
        if let reason = task.cancellationBeforeSubmit {
            task.phase = .waiting
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions)
            return
        }
        let scope = scope(for: task.concurrencyScope)
        task.scope = scope
        task.phase = .waiting
        switch task.concurrencyPolicy {
        case .default:
            startDirectly(task, in: scope, into: &actions)
        case .cancelOthers:
            for other in scope.started.snapshot() + scope.startedFromLine.snapshot() + scope.line.snapshot() {
                end(other, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
            }
            // Ending the last task of a named scope closed it; the new task opens it again, so the
            // scope it runs in is the one later tasks of the same key find.
            let reopened = self.scope(for: task.concurrencyScope)
            task.scope = reopened
            startDirectly(task, in: reopened, into: &actions)
        case .waitUntilDone:
            if scope.isIdle {
                startDirectly(task, in: scope, into: &actions)
            } else {
                scope.line.append(task, as: .line)
                emit(.waiting, for: task, into: &actions)
            }
        case .waitUntilDoneHighPriority:
            if scope.hasRunning {
                scope.line.prepend(task, as: .line)
                emit(.waiting, for: task, into: &actions)
            } else {
                startDirectly(task, in: scope, into: &actions)
            }
        case .ignoreCurrent:
            if scope.isIdle {
                startDirectly(task, in: scope, into: &actions)
            } else {
                end(task, with: .failure(.ignored), into: &actions)
            }
        }
        if let deadline = task.deadline, task.phase != .ended {
            actions.deadlines.append((task, deadline))
        }
    }

    /// One task is cancelled: it ends at once (or, not yet sent, when it is).
    mutating func cancel(_ task: AnyAPITask, reason: APIError.CancellationReason, into actions: inout Actions) {
        switch task.phase {
        case .created:
            if task.cancellationBeforeSubmit == nil { task.cancellationBeforeSubmit = reason }
        case .ended:
            break
        case .waiting, .running, .waitingForRetry:
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions)
        }
    }

    /// Several tasks are cancelled together: every one ends before any line moves on, so a waiting
    /// task that is itself being cancelled never starts (and is never sent) because a task ahead of
    /// it ended first.
    mutating func cancel(tasks: [AnyAPITask], reason: APIError.CancellationReason, into actions: inout Actions) {
        var touched: [ObjectIdentifier: ScopeState] = [:]
        for task in tasks where task.phase != .ended {
            if let scope = task.scope { touched[ObjectIdentifier(scope)] = scope }
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions, pump: false)
        }
        for scope in touched.values.sorted(by: { ($0.key ?? "") < ($1.key ?? "") }) {
            pump(scope, into: &actions)
        }
    }

    /// The attempt's request is built: it may go to the transport only if it is still the task's
    /// current attempt. An attempt abandoned while it was being built is settled here instead.
    mutating func claimSend(_ task: AnyAPITask, attempt: Int) -> Bool {
        guard task.attemptNumber == attempt else { return false }
        if case .abandoned = task.attemptProgress {
            task.attemptProgress = .idle
            return false
        }
        guard task.phase == .running else { return false }
        task.attemptProgress = .starting  // a replay sends the attempt again
        return true
    }

    /// The async step of an attempt started (an interceptor, a wait for a refresh): kept, to be
    /// cancelled if the task ends; `false` when the attempt is no longer current (the caller cancels it).
    mutating func track(_ work: any APICancellable, for task: AnyAPITask, attempt: Int) -> Bool {
        guard task.phase != .ended, task.attemptNumber == attempt else { return false }
        task.pendingWork.append(work)
        return true
    }

    /// The attempt's credential was refused: whether it may be sent again after a refresh, which
    /// each task may do once.
    mutating func claimReplay(_ task: AnyAPITask, attempt: Int) -> Bool {
        guard isCurrent(task, attempt: attempt), !task.hasReplayed else { return false }
        task.hasReplayed = true
        return true
    }

    /// The transport took the attempt and gave its handle; a task that ended meanwhile has it
    /// cancelled.
    mutating func attemptSent(
        _ task: AnyAPITask, attempt: Int, handle: any APICancellable, into actions: inout Actions
    ) {
        guard task.attemptNumber == attempt else { return }
        switch task.attemptProgress {
        case .starting:
            task.attemptProgress = .sent(handle)
        case .abandoned:
            task.attemptProgress = .idle
            actions.cancellations.append(handle)
        case .idle, .sent:
            break  // the transport completed inside `send`
        }
    }

    /// The attempt's response was built, or the attempt failed: the task retries after
    /// `retryDelay` (a failure the hook wants retried) or ends.
    mutating func attemptEnded(
        _ task: AnyAPITask, attempt: Int, outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseSource, retryDelay: Double?, into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        task.attemptProgress = .idle
        switch (outcome, retryDelay) {
        case (.failure(let error), let delay?):
            task.phase = .waitingForRetry
            emit(.willRetry(delay: delay, error: error), for: task, into: &actions)
            if delay == 0 {
                beginAttempt(task, into: &actions)
            } else {
                actions.retries.append((task, attempt, delay))
            }
        default:
            end(task, with: outcome, source: source, into: &actions)
        }
    }

    /// A stored response answers the attempt (`terminal`) or comes ahead of the network.
    mutating func cachedResponse(
        _ task: AnyAPITask, attempt: Int, response: AnyAPITask.BuiltResponse, terminal: Bool,
        into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        if terminal {
            task.attemptProgress = .idle
            end(task, with: .success(response), source: .cache, into: &actions)
        } else {
            emit(.cachedResponse(response), for: task, into: &actions)
            if task.isObserved { actions.observations.append((task, .cached(response))) }
        }
    }

    /// A timer was scheduled for the task: whether it is still needed (else it is to be cancelled).
    func needsRetryTimer(_ task: AnyAPITask, attempt: Int) -> Bool {
        task.phase == .waitingForRetry && task.attemptNumber == attempt
    }

    func needsDeadlineTimer(_ task: AnyAPITask) -> Bool { task.phase != .ended }

    mutating func retryTimerFired(_ task: AnyAPITask, attempt: Int, into actions: inout Actions) {
        guard needsRetryTimer(task, attempt: attempt) else { return }
        task.retryTimer = nil
        beginAttempt(task, into: &actions)
    }

    mutating func deadlineFired(_ task: AnyAPITask, deadline: Double, into actions: inout Actions) {
        guard task.phase != .ended else { return }
        task.deadlineTimer = nil
        let attempts = task.attemptNumber
        end(task, with: .failure(.timedOut(deadline: deadline, attempts: attempts)), into: &actions)
    }

    /// The engine is released: every task in flight ends as cancelled, without delegate events
    /// (there is no manager left), its requests and timers cancelled and async callers told.
    mutating func release(into actions: inout Actions) {
        for task in inFlightTasks {
            end(
                task, with: .failure(.cancelled(reason: .managerReleased)), into: &actions, pump: false,
                notify: false)
        }
    }

    /// Moves the queued events into `batch` (empty, its capacity reused) for delivery; `false`, with
    /// nothing moved, once none are left, which ends the delivery run.
    mutating func takeEvents(into batch: inout [(AnyAPITask, AnyAPITask.Event)]) -> Bool {
        if outbox.isEmpty {
            isDeliveryScheduled = false
            if spareOutbox.capacity < batch.capacity { swap(&spareOutbox, &batch) }
            return false
        }
        if batch.capacity == 0 { swap(&batch, &spareOutbox) }
        swap(&batch, &outbox)
        return true
    }

    // MARK: Transitions

    private mutating func scope(for key: String?) -> ScopeState {
        guard let key else { return defaultScope }
        if let scope = namedScopes[key] { return scope }
        let scope = ScopeState(key: key)
        namedScopes[key] = scope
        return scope
    }

    private mutating func startDirectly(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        scope.started.append(task, as: .started)
        beginAttempt(task, into: &actions)
    }

    private mutating func beginAttempt(_ task: AnyAPITask, into actions: inout Actions) {
        task.attemptNumber += 1
        task.phase = .running
        task.attemptProgress = .starting
        emit(.started(attempt: task.attemptNumber), for: task, into: &actions)
        actions.starts.append((task, task.attemptNumber))
    }

    /// Starts the head of the line while it may start.
    private mutating func pump(_ scope: ScopeState, into actions: inout Actions) {
        while let head = scope.line.head, scope.canStart(head) {
            scope.line.remove(head)
            scope.startedFromLine.append(head, as: .startedFromLine)
            beginAttempt(head, into: &actions)
        }
    }

    private mutating func end(
        _ task: AnyAPITask, with outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseSource? = nil, into actions: inout Actions, pump shouldPump: Bool = true,
        notify: Bool = true
    ) {
        guard task.phase != .ended else { return }
        if case .success = outcome { task.source = source ?? .network }
        switch task.attemptProgress {
        case .sent(let handle):
            actions.cancellations.append(handle)
            task.attemptProgress = .idle
        case .starting:
            task.attemptProgress = .abandoned
        case .idle, .abandoned:
            break
        }
        if let timer = task.retryTimer {
            actions.cancellations.append(timer)
            task.retryTimer = nil
        }
        if let timer = task.deadlineTimer {
            actions.cancellations.append(timer)
            task.deadlineTimer = nil
        }
        if !task.pendingWork.isEmpty {
            actions.cancellations += task.pendingWork
            task.pendingWork = []
        }
        task.phase = .ended
        if case .failure(let error) = outcome { task.failure = error }
        if notify {
            switch outcome {
            case .success(let response): emit(.finished(response), for: task, into: &actions)
            case .failure(let error): emit(.failed(error), for: task, into: &actions)
            }
        }
        if task.isObserved {
            task.isObserved = false
            actions.observations.append((task, .ended(outcome, task.source)))
        }
        // Leave the scope after the terminal event, so the task that takes its place starts after it.
        if let scope = task.scope {
            switch task.membership {
            case .started: scope.started.remove(task)
            case .startedFromLine: scope.startedFromLine.remove(task)
            case .line: scope.line.remove(task)
            case .none: break
            }
            task.scope = nil
            if shouldPump { pump(scope, into: &actions) }
            // A named scope exists exactly as long as it has a task in flight.
            if let key = scope.key, scope.isIdle, namedScopes[key] === scope { namedScopes[key] = nil }
        }
    }

    private mutating func emit(_ event: AnyAPITask.Event, for task: AnyAPITask, into actions: inout Actions) {
        outbox.append((task, event))
        if !isDeliveryScheduled {
            isDeliveryScheduled = true
            actions.deliverEvents = true
        }
    }
}
