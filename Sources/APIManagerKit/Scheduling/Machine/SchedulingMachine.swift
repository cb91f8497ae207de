/// The scheduling rules: concurrency policies, lines, retries, deadlines, cancellation, and the
/// engine's circuit breaker and retry budget, as a value whose events change it and each return
/// the actions to perform (``Actions``, of ``Action``s, `Equatable`).
///
/// It calls out to nothing but the ``APIConcurrencyPolicy/Group`` of a task that has one and the
/// ``SharedAnswer`` of a shared attempt, whose locks are leaves (taken under the engine's, never the
/// other way round); a slot the group hands to a task of another engine is an action
/// (``Action/grantSlot(_:)``), performed after the lock is released.
///
/// Events, by file of this folder: a task sent, cancelled, the engine released (here); an attempt
/// made (the machine keeps its link, ``AttemptLink``, and cancels it if the task ends while the
/// attempt runs: the attempt then learns it is over without asking), its request built (admitted by
/// the circuit, `+Resilience`), its credential refused, its progress, its end (`+Attempts`); timers set and firing (`+Timers`); a group's slot granted
/// (`+Transitions`). What each policy does when a task is sent is one function in `+Policies`.
///
/// What ends with a task is decided in `end` (`+Transitions`), the one place a task ends: its
/// work cancelled, its terminal event queued, its async caller told, its own streams ended
/// (``Action/feedStreams(_:_:)``: its progress sequences after the reports the machine numbered,
/// its body stream; performed at once, not on the delivery queue, and by a released engine too),
/// its place given up, and what becomes of a durable task's record (``Action/settleDurable(_:_:)``,
/// judged in `+DurableLine`, carried out by the task's ``DurableSlot`` once the app has been told).
/// A new end-of-task action touches: its ``Action`` case (`+Actions`: the case, `==`,
/// `description`, `append`), its decision in `end` (the judgement in the file of its concern), its
/// performance in `APIEngine+Effects.swift` (in `performCancellationsAndObservations()` when a
/// released engine must perform it too; and the value that carries it out, if any:
/// `TaskBag.feed(_:)` for the streams), and its rows in the machine's event tests
/// (`DurableSettlingTests` for the durable record's, `TaskStreamsMachineTests` for the streams').
///
/// The machine never calls out (no transport, clock, hook or delegate), so the engine calls it
/// while holding its lock and performs the actions after unlocking, and tests drive it alone. It
/// owns all scheduling state: the scopes and their lines, each task's ``SchedulingRecord`` (its
/// lifecycle, attempt and timers: stored in the task, read and written only here), the throttle's
/// turns and the circuits and retry budgets per origin. Timers are set as actions and recorded by
/// events, so no one else writes a task's state. Delivery bookkeeping is the ``EventOutbox``'s.
struct SchedulingMachine {
    // The machine's state. Written only by the machine's own files (this folder); the events are
    // spread over them by concern: the policies (`+Policies`), an attempt's steps (`+Attempts`), the
    // timers (`+Timers`), and the transitions they share (`+Transitions`).
    let defaultScope = ScopeState(key: nil)
    var namedScopes: [String: ScopeState] = [:]
    var nextSequence: UInt64 = 0
    /// The last identifier given to a task (``identify(_:)``).
    var nextIdentifier: UInt64 = 0
    /// When the next ``APIConcurrencyPolicy/throttle`` task of each scope may start.
    var throttleTurns = ThrottleTurns()
    var outbox = EventOutbox()
    /// The engine's circuit breaker and retry budget, per origin (`SchedulingMachine+Resilience.swift`).
    var resilience: Resilience
    /// Whether the network is reachable, as the engine knows it (`SchedulingMachine+Connectivity.swift`).
    var connectivity = ConnectivityState()
    /// The scopes whose durable line a final refusal stopped (``APIEngine/DurableStore/Refusal/stopTheLine``):
    /// their lines do not move until the app resolves the refusal (`SchedulingMachine+DurableLine.swift`).
    var stoppedScopes: Set<String?> = []
    /// The scopes whose durable line still has restored records on disk, not yet made into tasks
    /// (a replay keeps a window of them in memory): only restored tasks start there until the
    /// store says the backlog is drained (`SchedulingMachine+DurableLine.swift`).
    var durableBacklogs: Set<String?> = []

    init(circuitBreaker: APIEngine.CircuitBreaker? = nil, retryBudget: APIEngine.RetryBudget? = nil) {
        resilience = Resilience(breaker: circuitBreaker, budget: retryBudget)
    }

    /// The throttle turns kept (tests: they stay bounded however many scopes are throttled).
    var throttleTurnCount: Int { throttleTurns.count }

    // MARK: Reading

    /// The number of tasks in flight: waiting, running or waiting for a retry.
    var inFlightCount: Int {
        namedScopes.values.reduce(Self.count(of: defaultScope)) { $0 + Self.count(of: $1) }
    }

    private static func count(of scope: ScopeState) -> Int {
        scope.started.count + scope.startedFromLine.count + scope.line.count + scope.quiet.count
    }

    /// How many tasks wait before `task` in its scope's line (0: it is next); `nil` when it is not
    /// in a line. O(length of the line): for observers only.
    func tasksAhead(of task: AnyAPITask) -> Int? {
        switch task.record.membership {
        case .line, .lineFront, .lineRestored: break
        case .none, .started, .startedFromLine, .quiet: return nil
        }
        return openScope(task.concurrencyScope)?.line.snapshot().firstIndex { $0 === task }
    }

    /// The scope of `key`: the default one for `nil`, a named one while it is open.
    func openScope(_ key: String?) -> ScopeState? {
        key.flatMap { namedScopes[$0] } ?? (key == nil ? defaultScope : nil)
    }

    /// The in-flight tasks: per scope, the running ones, then the line from head to tail.
    var inFlightTasks: [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        for scope in [defaultScope] + Array(namedScopes.values) {
            tasks += scope.started.snapshot()
            tasks += scope.startedFromLine.snapshot()
            tasks += scope.line.snapshot()
            tasks += scope.quiet.snapshot()
        }
        return tasks
    }

    /// Whether `attempt` is the task's current, running attempt.
    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        // The running attempt's number is always the count of attempts started: no payload is read.
        guard case .running = task.record.lifecycle else { return false }
        return task.record.attemptCount == attempt
    }

    /// What users read of a task (``AnyAPITask/state``), from the record only the machine reads and
    /// writes. Called under the engine's lock.
    func state(of task: AnyAPITask) -> AnyAPITask.State {
        switch task.record.lifecycle {
        case .created, .waiting, .waitingForConnectivity: return .waiting
        case .running: return .running
        case .waitingForRetry: return .waitingForRetry
        case .ended(let ending):
            if let failure = ending.failure { return .failed(failure) }
            return .finished
        }
    }

    /// Where the response that ended the task came from (``AnyAPITask/responseSource``); `nil` until
    /// it finishes with one. Called under the engine's lock.
    func responseSource(of task: AnyAPITask) -> APIResponseCache.Source? {
        if case .ended(let ending) = task.record.lifecycle { return ending.source }
        return nil
    }

    /// How many attempts of the task have started (``AnyAPITask/attemptCount``). Called under the
    /// engine's lock.
    func attemptCount(of task: AnyAPITask) -> Int { task.record.attemptCount }

    // MARK: Events

    /// A task about to be sent gets its identifier, once, and nothing else: it joins no line and no
    /// other event sees it until it is sent (``send(_:observed:now:)``). The engine calls it first
    /// when it has observers, so that they are told the task was sent, with its identifier, before
    /// any other thread can do anything to it.
    /// Returns whether it did (`false`: identified or sent already).
    @discardableResult
    mutating func identify(_ task: AnyAPITask) -> Bool {
        guard case .created = task.record.lifecycle, !task.record.isIdentified else { return false }
        nextIdentifier += 1
        task.identifier = nextIdentifier
        task.record.isIdentified = true
        return true
    }

    /// A task is sent: it gets its identifier (unless ``identify(_:)`` gave it one), and its policy starts it, queues it, ignores it, or
    /// (cancelled before it was sent) ends it (see `SchedulingMachine+Policies.swift`, one function
    /// per policy). `now` is the engine's clock, read only for a policy that
    /// ``APIConcurrencyPolicy/readsClockWhenSent``.
    mutating func send(_ task: AnyAPITask, observed: Bool, now: Double = 0) -> Actions {
        var actions = Actions()
        guard case .created(let cancelledBeforeSend) = task.record.lifecycle else { return actions }
        task.record.isObserved = observed
        identify(task)
        nextSequence += 1
        task.record.sequence = nextSequence
        task.record.lifecycle = .waiting(timer: nil)
        if let reason = cancelledBeforeSend {
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions)
            return actions
        }
        let scope = scope(for: task.concurrencyScope)
        task.record.scope = scope
        apply(task.concurrencyPolicy, to: task, in: scope, now: now, into: &actions)
        if let deadline = task.bag.deadline, !task.record.hasEnded {
            actions.append(.scheduleDeadline(task, after: deadline))
        }
        return actions
    }

    /// A task is sent that cannot be (a durable task that could not be written): it gets its
    /// identifier as any sent task does, then ends at once with `error`, in no scope and never started.
    mutating func sendRefused(_ task: AnyAPITask, observed: Bool, error: APIError) -> Actions {
        var actions = Actions()
        guard case .created = task.record.lifecycle else { return actions }
        task.record.isObserved = observed
        identify(task)
        nextSequence += 1
        task.record.sequence = nextSequence
        task.record.lifecycle = .waiting(timer: nil)
        end(task, with: .failure(error), into: &actions)
        return actions
    }

    /// One task is cancelled: it ends at once (or, not yet sent, when it is).
    mutating func cancel(_ task: AnyAPITask, reason: APIError.CancellationReason) -> Actions {
        var actions = Actions()
        switch task.record.lifecycle {
        case .created(nil):
            task.record.lifecycle = .created(cancelledBeforeSend: reason)
        case .created, .ended:
            break
        case .waiting, .running, .waitingForRetry, .waitingForConnectivity:
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions)
        }
        return actions
    }

    /// Several tasks are cancelled together: every one ends before any line moves on, so a waiting
    /// task that is itself being cancelled never starts (and is never sent) because a task ahead of
    /// it ended first.
    mutating func cancel(tasks: [AnyAPITask], reason: APIError.CancellationReason) -> Actions {
        var actions = Actions()
        var touched: [ObjectIdentifier: ScopeState] = [:]
        for task in tasks where !task.record.hasEnded {
            if let scope = task.record.scope { touched[ObjectIdentifier(scope)] = scope }
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions, pump: false)
        }
        for scope in touched.values.sorted(by: { ($0.key ?? "") < ($1.key ?? "") }) {
            pump(scope, into: &actions)
        }
        return actions
    }

    /// The engine is released: every task in flight ends as cancelled, without delegate events
    /// (there is no manager left), its requests and timers cancelled and async callers told.
    mutating func release() -> Actions {
        var actions = Actions()
        for task in inFlightTasks {
            end(
                task, with: .failure(.cancelled(reason: .managerReleased)), into: &actions, pump: false,
                notify: false)
        }
        return actions
    }

    /// Moves the queued events into `batch` for delivery; `false` once none are left (see
    /// ``EventOutbox/take(into:)``).
    mutating func takeEvents(into batch: inout EventOutbox.Batch) -> Bool {
        outbox.take(into: &batch)
    }
}
