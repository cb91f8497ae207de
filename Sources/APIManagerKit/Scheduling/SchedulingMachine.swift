/// The scheduling rules: concurrency policies, lines, retries, deadlines and cancellation, as a value
/// whose events change it and return the actions to perform (``Action``, `Equatable`).
///
/// It calls out to nothing but the ``APIConcurrencyPolicy/Group`` of a task that has one, whose lock is a
/// leaf (taken under the engine's, never the other way round); a slot the group hands to a task
/// of another engine is an action (``Action/grantSlot(_:)``), performed after the lock is released.
///
/// Events: ``send(_:observed:into:)``, ``cancel(_:reason:into:)``, ``cancel(tasks:reason:into:)``,
/// ``requestBuilt(_:attempt:into:)``, ``asyncStepStarted(_:for:attempt:into:)``,
/// ``attemptSent(_:attempt:handle:into:)``, ``credentialRefused(_:attempt:into:)``,
/// ``attemptEnded(_:attempt:outcome:source:retryDelay:into:)``,
/// ``cachedResponse(_:attempt:response:terminal:into:)``, ``retryTimerSet(_:attempt:timer:into:)``,
/// ``retryTimerFired(_:attempt:into:)``, ``deadlineTimerSet(_:timer:into:)``,
/// ``deadlineFired(_:deadline:into:)`` and ``release(into:)``.
///
/// The machine never calls out (no transport, clock, hook or delegate), so the engine calls it
/// while holding its lock and performs the actions after unlocking, and tests drive it alone. It
/// owns all scheduling state: the scopes and their lines, and each task's ``SchedulingRecord`` (its
/// lifecycle, attempt and timers), which sits in the task for O(1) access but is written only here.
/// Timers are set as actions and recorded by events, so no one else writes a task's state.
/// Delivery bookkeeping is the ``EventOutbox``'s.
struct SchedulingMachine {
    private let defaultScope = ScopeState(key: nil)
    private var namedScopes: [String: ScopeState] = [:]
    private var nextSequence: UInt64 = 0
    /// Per scope key, when the next ``APIConcurrencyPolicy/throttle`` task may start, on the engine's
    /// clock. Kept past the scope's last task (a throttle outlives it), and pruned of passed turns.
    private var throttleTurns: [ScopeKey: Double] = [:]
    /// The number of turns past which passed ones are pruned: twice the live ones at the last
    /// pruning, so that pruning costs O(1) per throttled send however many scopes are throttled.
    private var throttlePruningAt = 16

    /// The throttle turns kept (tests: they stay bounded however many scopes are throttled).
    var throttleTurnCount: Int { throttleTurns.count }

    /// A scope key as a dictionary key (`nil` is a scope of its own).
    private struct ScopeKey: Hashable {
        let key: String?
    }
    private var outbox = EventOutbox()

    // MARK: Reading

    /// The number of tasks in flight: waiting, running or waiting for a retry.
    var inFlightCount: Int {
        namedScopes.values.reduce(Self.count(of: defaultScope)) { $0 + Self.count(of: $1) }
    }

    private static func count(of scope: ScopeState) -> Int {
        scope.started.count + scope.startedFromLine.count + scope.line.count + scope.quiet.count
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

    // MARK: Events

    /// A task is sent: it gets its identifier, and its policy starts it, queues it, ignores it, or
    /// (cancelled before it was sent) ends it. `now` is the engine's clock, read for
    /// ``APIConcurrencyPolicy/throttle`` tasks only.
    mutating func send(_ task: AnyAPITask, observed: Bool, now: Double = 0, into actions: inout Actions) {
        guard case .created(let cancelledBeforeSend) = task.record.lifecycle else { return }
        task.record.isObserved = observed
        nextSequence += 1
        task.record.sequence = nextSequence
        task.identifier = nextSequence
        task.record.lifecycle = .waiting(timer: nil)
        if let reason = cancelledBeforeSend {
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions)
            return
        }
        let scope = scope(for: task.concurrencyScope)
        task.record.scope = scope
        switch task.concurrencyPolicy {
        case .default:
            startDirectly(task, in: scope, into: &actions)
        case .cancelOthers:
            for other in scope.started.snapshot() + scope.startedFromLine.snapshot() + scope.line.snapshot()
                + scope.quiet.snapshot()
            {
                end(other, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
            }
            // Ending the last task of a named scope closed it; the new task opens it again, so the
            // scope it runs in is the one later tasks of the same key find.
            let reopened = self.scope(for: task.concurrencyScope)
            task.record.scope = reopened
            startDirectly(task, in: reopened, into: &actions)
        case .waitUntilDone:
            if scope.isIdle {
                startDirectly(task, in: scope, into: &actions)
            } else {
                wait(task, in: scope, atFront: false, into: &actions)
            }
        case .waitUntilDoneHighPriority:
            if scope.hasRunning {
                wait(task, in: scope, atFront: true, into: &actions)
            } else {
                startDirectly(task, in: scope, into: &actions)
            }
        case .conflate:
            if scope.isIdle {
                startDirectly(task, in: scope, into: &actions)
            } else if task.lineLimit?.effectiveMaxLength == 0 {
                // It could not wait even alone: it replaces nothing.
                end(task, with: .failure(.lineFull(maxLength: 0)), into: &actions)
            } else {
                // Replaces every waiting task; the running ones go on, so the scope stays open.
                for waiting in scope.line.snapshot() {
                    end(waiting, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
                }
                wait(task, in: scope, atFront: false, into: &actions)
            }
        case .limited:
            if scope.line.isEmpty && scope.runningCount < task.concurrencyLimit {
                startDirectly(task, in: scope, into: &actions)
            } else {
                wait(task, in: scope, atFront: false, into: &actions)
            }
        case .debounce:
            // Replaces the debounced tasks still in their quiet wait; throttled ones keep their turns.
            for quiet in scope.quiet.snapshot() where quiet.concurrencyPolicy == .debounce {
                end(quiet, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
            }
            let reopened = self.scope(for: task.concurrencyScope)
            task.record.scope = reopened
            waitQuietly(task, in: reopened, for: task.pacing.debounceInterval, into: &actions)
        case .throttle:
            let key = ScopeKey(key: task.concurrencyScope)
            if throttleTurns.count >= throttlePruningAt {
                // Passed turns are forgotten (a passed turn and none mean the same: start now).
                throttleTurns = throttleTurns.filter { $0.value > now }
                throttlePruningAt = max(16, throttleTurns.count * 2)
            }
            let turn = max(now, throttleTurns[key] ?? now)
            if turn <= now {
                throttleTurns[key] = now + task.pacing.throttleInterval
                startDirectly(task, in: scope, into: &actions)
            } else if task.pacing.throttleWaits {
                throttleTurns[key] = turn + task.pacing.throttleInterval
                task.record.throttleTurn = turn
                waitQuietly(task, in: scope, for: turn - now, into: &actions)
            } else {
                end(task, with: .failure(.ignored), into: &actions)
            }
        case .ignoreCurrent:
            if scope.isIdle {
                startDirectly(task, in: scope, into: &actions)
            } else {
                end(task, with: .failure(.ignored), into: &actions)
            }
        }
        if let deadline = task.deadline, !task.record.hasEnded {
            actions.append(.scheduleDeadline(task, after: deadline))
        }
    }

    /// One task is cancelled: it ends at once (or, not yet sent, when it is).
    mutating func cancel(_ task: AnyAPITask, reason: APIError.CancellationReason, into actions: inout Actions) {
        switch task.record.lifecycle {
        case .created(nil):
            task.record.lifecycle = .created(cancelledBeforeSend: reason)
        case .created, .ended:
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
        for task in tasks where !task.record.hasEnded {
            if let scope = task.record.scope { touched[ObjectIdentifier(scope)] = scope }
            end(task, with: .failure(.cancelled(reason: reason)), into: &actions, pump: false)
        }
        for scope in touched.values.sorted(by: { ($0.key ?? "") < ($1.key ?? "") }) {
            pump(scope, into: &actions)
        }
    }

    /// The attempt's request is built: ``Action/send(_:attempt:)`` if it is still the task's
    /// current attempt. An attempt abandoned while it was being built is settled here instead.
    mutating func requestBuilt(_ task: AnyAPITask, attempt: Int, into actions: inout Actions) {
        switch task.record.takeLifecycle() {
        case .running(var running) where running.number == attempt:
            running.progress = .starting  // a replay sends the attempt again
            task.record.lifecycle = .running(running)
            actions.append(.send(task, attempt: attempt))
        case .ended(var ending) where ending.abandonedAttempt == attempt:
            ending.abandonedAttempt = nil
            task.record.lifecycle = .ended(ending)
        case let other:
            task.record.lifecycle = other
        }
    }

    /// An async step of the attempt started (an interceptor, a wait for a refresh): kept, to be
    /// cancelled if the task ends, or cancelled at once when the attempt is no longer current.
    mutating func asyncStepStarted(
        _ work: any APICancellable, for task: AnyAPITask, attempt: Int, into actions: inout Actions
    ) {
        switch task.record.lifecycle {
        case .running(var running) where running.number == attempt:
            running.work.append(work)
            task.record.lifecycle = .running(running)
        default:
            actions.append(.cancel(Handle(work)))
        }
    }

    /// The transport took the attempt and gave its handle; a task that ended meanwhile has it
    /// cancelled.
    mutating func attemptSent(
        _ task: AnyAPITask, attempt: Int, handle: any APICancellable, into actions: inout Actions
    ) {
        switch task.record.takeLifecycle() {
        case .running(var running) where running.number == attempt:
            // Unless the transport completed inside `send`.
            if case .starting = running.progress { running.progress = .sent(handle) }
            task.record.lifecycle = .running(running)
        case .ended(var ending) where ending.abandonedAttempt == attempt:
            ending.abandonedAttempt = nil
            task.record.lifecycle = .ended(ending)
            actions.append(.cancel(Handle(handle)))
        case let other:
            task.record.lifecycle = other
        }
    }

    /// The attempt's credential was refused: ``Action/replay(_:attempt:)`` when it may be sent again
    /// after a refresh, which each task may do once.
    mutating func credentialRefused(_ task: AnyAPITask, attempt: Int, into actions: inout Actions) {
        guard isCurrent(task, attempt: attempt), !task.record.hasReplayed else { return }
        task.record.hasReplayed = true
        actions.append(.replay(task, attempt: attempt))
    }

    /// The attempt's response was built, or the attempt failed: the task retries after
    /// `retryDelay` (a failure the hook wants retried) or ends.
    mutating func attemptEnded(
        _ task: AnyAPITask, attempt: Int, outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseCache.Source, retryDelay: Double?, into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        switch (outcome, retryDelay) {
        case (.failure(let error), let delay?):
            cancelWork(of: task, into: &actions)
            task.record.lifecycle = .waitingForRetry(attempt: attempt, timer: nil)
            emit(.willRetry(delay: delay, error: error), for: task, into: &actions)
            if delay == 0 {
                beginAttempt(task, into: &actions)
            } else {
                actions.append(.scheduleRetry(task, attempt: attempt, after: delay))
            }
        default:
            end(task, with: outcome, source: source, into: &actions, attemptIsOver: true)
        }
    }

    /// A stored response answers the attempt (`terminal`) or comes ahead of the network.
    mutating func cachedResponse(
        _ task: AnyAPITask, attempt: Int, response: AnyAPITask.BuiltResponse, terminal: Bool,
        into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        if terminal {
            end(task, with: .success(response), source: .cache, into: &actions, attemptIsOver: true)
        } else {
            emit(.cachedResponse(response), for: task, into: &actions)
            if task.record.isObserved { actions.append(.tell(task, .cached(response))) }
        }
    }

    /// The timer of ``Action/scheduleRetry(_:attempt:after:)`` was set: kept, or cancelled when the
    /// task no longer waits for that retry.
    mutating func retryTimerSet(
        _ task: AnyAPITask, attempt: Int, timer: any APICancellable, into actions: inout Actions
    ) {
        if case .waitingForRetry(attempt, nil) = task.record.lifecycle {
            task.record.lifecycle = .waitingForRetry(attempt: attempt, timer: timer)
        } else {
            actions.append(.cancel(Handle(timer)))
        }
    }

    mutating func retryTimerFired(_ task: AnyAPITask, attempt: Int, into actions: inout Actions) {
        guard case .waitingForRetry(attempt, _) = task.record.lifecycle else { return }
        beginAttempt(task, into: &actions)
    }

    /// The current attempt of a task reported progress: told to the delegate, in order with its
    /// other events. A report of an attempt that is no longer current is dropped.
    mutating func progressReported(
        _ task: AnyAPITask, attempt: Int, progress: APITransferProgress, into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        emit(.progress(progress), for: task, into: &actions)
    }

    /// The timer of ``Action/scheduleWaitLimit(_:after:)`` was set: kept while the task waits, else
    /// cancelled.
    mutating func waitTimerSet(_ task: AnyAPITask, timer: any APICancellable, into actions: inout Actions) {
        if case .waiting(nil) = task.record.lifecycle {
            task.record.lifecycle = .waiting(timer: timer)
        } else {
            actions.append(.cancel(Handle(timer)))
        }
    }

    /// The task's wait limit passed: still waiting, it leaves the line and ends; nothing was sent.
    mutating func waitLimitFired(_ task: AnyAPITask, maxWait: Double, into actions: inout Actions) {
        guard case .waiting = task.record.lifecycle, task.record.membership != .none else { return }
        task.record.lifecycle = .waiting(timer: nil)  // it fired
        end(task, with: .failure(.waitedTooLong(maxWait: maxWait)), into: &actions)
    }

    /// The quiet wait of a debounced or throttled task ended: still waiting, it starts.
    mutating func quietEnded(_ task: AnyAPITask, into actions: inout Actions) {
        guard case .waiting = task.record.lifecycle, task.record.membership == .quiet,
            let scope = task.record.scope
        else { return }
        task.record.lifecycle = .waiting(timer: nil)  // it fired
        if let maxWait = task.record.quietLimit {
            // Its wait limit came before its turn: it ends, and gives the turn back (see `end`).
            end(task, with: .failure(.waitedTooLong(maxWait: maxWait)), into: &actions)
            return
        }
        task.record.throttleTurn = nil
        scope.quiet.remove(task)
        startDirectly(task, in: scope, waitedAlready: true, into: &actions)
    }

    /// The timer of ``Action/scheduleDeadline(_:after:)`` was set: kept, or cancelled when the task
    /// has ended.
    mutating func deadlineTimerSet(_ task: AnyAPITask, timer: any APICancellable, into actions: inout Actions) {
        if task.record.hasEnded || task.record.deadlineTimer != nil {
            actions.append(.cancel(Handle(timer)))
        } else {
            task.record.deadlineTimer = timer
        }
    }

    mutating func deadlineFired(_ task: AnyAPITask, deadline: Double, into actions: inout Actions) {
        switch task.record.lifecycle {
        case .created, .ended: return
        case .waiting, .running, .waitingForRetry: break
        }
        task.record.deadlineTimer = nil  // it fired
        let attempts = task.record.attemptCount
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

    /// Moves the queued events into `batch` for delivery; `false` once none are left (see
    /// ``EventOutbox/take(into:)``).
    mutating func takeEvents(into batch: inout EventOutbox.Batch) -> Bool {
        outbox.take(into: &batch)
    }

    // MARK: Transitions

    private mutating func scope(for key: String?) -> ScopeState {
        guard let key else { return defaultScope }
        if let scope = namedScopes[key] { return scope }
        let scope = ScopeState(key: key)
        namedScopes[key] = scope
        return scope
    }

    /// The task joins the line (at its front, or by priority), unless the line is already as long as
    /// its ``APIConcurrencyPolicy/LineLimit/maxLength`` allows; its ``APIConcurrencyPolicy/LineLimit/maxWait`` timer is to be set.
    private mutating func wait(
        _ task: AnyAPITask, in scope: ScopeState, atFront: Bool, into actions: inout Actions
    ) {
        if let maxLength = task.lineLimit?.effectiveMaxLength, scope.line.count >= maxLength {
            end(task, with: .failure(.lineFull(maxLength: maxLength)), into: &actions)
            return
        }
        if atFront { scope.line.joinFront(task) } else { scope.line.join(task) }
        emit(.waiting, for: task, into: &actions)
        if let maxWait = task.lineLimit?.effectiveMaxWait {
            actions.append(.scheduleWaitLimit(task, after: maxWait))
        }
        // A scope busy only with tasks in a quiet wait has nothing running: the head may start now.
        if !scope.hasRunning { pump(scope, into: &actions) }
    }

    /// The task waits outside the line for `interval` seconds (a debounce's quiet wait, a throttled
    /// task's turn), then starts directly.
    private mutating func waitQuietly(
        _ task: AnyAPITask, in scope: ScopeState, for interval: Double, into actions: inout Actions
    ) {
        scope.quiet.append(task, as: .quiet)
        emit(.waiting, for: task, into: &actions)
        // A wait longer than the task's line limit allows ends at the limit (APIConcurrencyPolicy.LineLimit.maxWait).
        if let maxWait = task.lineLimit?.effectiveMaxWait, maxWait < interval {
            task.record.quietLimit = maxWait
            actions.append(.scheduleQuietEnd(task, after: maxWait))
        } else {
            actions.append(.scheduleQuietEnd(task, after: interval))
        }
    }

    /// Lists the task as started in its scope and admits it; `waitedAlready` when its `waiting` event
    /// was told (a quiet wait).
    private mutating func startDirectly(
        _ task: AnyAPITask, in scope: ScopeState, waitedAlready: Bool = false, into actions: inout Actions
    ) {
        scope.started.append(task, as: .started)
        admit(task, waitedAlready: waitedAlready, into: &actions)
    }

    /// The task's policy starts it: its first attempt begins, once it holds a slot of its group.
    /// Without one free it waits for the group (``groupSlotGranted(_:into:)``).
    private mutating func admit(_ task: AnyAPITask, waitedAlready: Bool, into actions: inout Actions) {
        if let group = task.concurrencyGroup, !task.record.holdsGroupSlot {
            guard group.acquire(for: task) else {
                task.record.awaitsGroupSlot = true
                if !waitedAlready { emit(.waiting, for: task, into: &actions) }
                return
            }
            task.record.holdsGroupSlot = true
        }
        beginAttempt(task, into: &actions)
    }

    /// The task's group handed it a slot: still waiting for one, its first attempt begins; ended
    /// meanwhile, it gives the slot back (to the next waiting task, if any).
    mutating func groupSlotGranted(_ task: AnyAPITask, into actions: inout Actions) {
        guard task.record.awaitsGroupSlot, !task.record.hasEnded else {
            if let next = task.concurrencyGroup?.release() { actions.append(.grantSlot(next)) }
            return
        }
        task.record.awaitsGroupSlot = false
        task.record.holdsGroupSlot = true
        beginAttempt(task, into: &actions)
    }

    private mutating func beginAttempt(_ task: AnyAPITask, into actions: inout Actions) {
        if case .waiting(let timer?) = task.record.lifecycle { actions.append(.cancel(Handle(timer))) }
        task.record.attemptCount += 1
        let attempt = task.record.attemptCount
        task.record.lifecycle = .running(SchedulingRecord.RunningAttempt(number: attempt))
        emit(.started(attempt: attempt), for: task, into: &actions)
        actions.append(.start(task, attempt: attempt))
    }

    /// Starts the head of the line while it may start.
    private mutating func pump(_ scope: ScopeState, into actions: inout Actions) {
        while let head = scope.line.head, scope.canStart(head) {
            scope.line.remove(head)
            scope.startedFromLine.append(head, as: .startedFromLine)
            admit(head, waitedAlready: true, into: &actions)
        }
    }

    /// Cancels the async steps of the task's running attempt.
    private func cancelWork(of task: AnyAPITask, into actions: inout Actions) {
        guard case .running(let running) = task.record.lifecycle else { return }
        for work in running.work { actions.append(.cancel(Handle(work))) }
    }

    /// Ends the task: what it still runs is cancelled, its terminal event queued, its async caller
    /// told, and its place in the scope given up. `attemptIsOver` when its current attempt itself
    /// ended it (its transport call, if still in progress, is done).
    private mutating func end(
        _ task: AnyAPITask, with outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseCache.Source? = nil, into actions: inout Actions, pump shouldPump: Bool = true,
        notify: Bool = true, attemptIsOver: Bool = false
    ) {
        var ending = SchedulingRecord.Ending()
        switch task.record.takeLifecycle() {
        case .ended(let ended):
            task.record.lifecycle = .ended(ended)
            return
        case .running(let running):
            // An attempt that ended the task itself has nothing left to cancel on the transport.
            switch running.progress {
            case .sent(let handle): if !attemptIsOver { actions.append(.cancel(Handle(handle))) }
            case .starting: if !attemptIsOver { ending.abandonedAttempt = running.number }
            }
            for work in running.work { actions.append(.cancel(Handle(work))) }
        case .waitingForRetry(_, let timer?), .waiting(let timer?):
            actions.append(.cancel(Handle(timer)))
        case .created, .waiting, .waitingForRetry:
            break
        }
        if let timer = task.record.deadlineTimer {
            actions.append(.cancel(Handle(timer)))
            task.record.deadlineTimer = nil
        }
        if let group = task.concurrencyGroup {
            if task.record.holdsGroupSlot {
                task.record.holdsGroupSlot = false
                if let next = group.release() { actions.append(.grantSlot(next)) }
            } else if task.record.awaitsGroupSlot {
                task.record.awaitsGroupSlot = false
                group.withdraw(task)
            }
        }
        switch outcome {
        case .success: ending.source = source ?? .network
        case .failure(let error): ending.failure = error
        }
        task.record.lifecycle = .ended(ending)
        if notify {
            switch outcome {
            case .success(let response): emit(.finished(response), for: task, into: &actions)
            case .failure(let error): emit(.failed(error), for: task, into: &actions)
            }
        }
        if task.record.isObserved {
            task.record.isObserved = false
            actions.append(.tell(task, .ended(outcome, ending.source)))
        }
        // Leave the scope after the terminal event, so the task that takes its place starts after it.
        if let scope = task.record.scope {
            switch task.record.membership {
            case .started: scope.started.remove(task)
            case .startedFromLine: scope.startedFromLine.remove(task)
            case .line, .lineFront: scope.line.remove(task)
            case .quiet:
                scope.quiet.remove(task)
                if let turn = task.record.throttleTurn { giveBackThrottleTurn(turn, of: task) }
            case .none: break
            }
            task.record.scope = nil
            if shouldPump { pump(scope, into: &actions) }
            // A named scope exists exactly as long as it has a task in flight.
            if let key = scope.key, scope.isIdle, namedScopes[key] === scope { namedScopes[key] = nil }
        }
    }

    /// A throttled task ended while it waited for its turn (cancelled, or past its deadline or wait
    /// limit): when no later task took the turn after it, the next one sent gets its turn instead of
    /// waiting behind a task that never ran. A turn with later ones after it stays taken: their
    /// timers are set, so the gap is not closed.
    private mutating func giveBackThrottleTurn(_ turn: Double, of task: AnyAPITask) {
        let key = ScopeKey(key: task.concurrencyScope)
        if throttleTurns[key] == turn + task.pacing.throttleInterval { throttleTurns[key] = turn }
    }

    private mutating func emit(_ event: AnyAPITask.Event, for task: AnyAPITask, into actions: inout Actions) {
        if outbox.append(event, for: task) { actions.deliverEvents = true }
    }
}

/// What the scheduling machine keeps of one task. It sits in the task (``AnyAPITask/record``) so
/// that the machine reaches it in O(1) without allocating, and it is written only by the machine:
/// its setters are private to this file. Guarded by the engine's lock.
struct SchedulingRecord {
    /// The task's lifecycle, each stage with what it holds.
    enum Lifecycle {
        /// Made, not yet sent; `cancelledBeforeSend` when it was cancelled already.
        case created(cancelledBeforeSend: APIError.CancellationReason?)
        /// Sent, in its scope's line; with the timer of its ``APIConcurrencyPolicy/LineLimit/maxWait`` once set.
        case waiting(timer: (any APICancellable)?)
        /// An attempt runs.
        case running(RunningAttempt)
        /// An attempt failed; the next one starts when the timer (once set) fires.
        case waitingForRetry(attempt: Int, timer: (any APICancellable)?)
        case ended(Ending)
    }

    struct RunningAttempt {
        let number: Int
        var progress = Progress.starting
        /// The attempt's async steps that did not finish at once (interceptors, a wait for a
        /// refresh): cancelled when the task ends. Cancelling one that already finished does
        /// nothing, so steps that finished are not taken out one by one.
        var work: [any APICancellable] = []
    }

    enum Progress {
        /// The engine is building the request or calling the transport.
        case starting
        /// The transport has the request.
        case sent(any APICancellable)
    }

    struct Ending {
        /// The error the task ended with; `nil` when it finished with a response. The response
        /// itself is not kept: a task the caller holds after it ended does not keep its body alive.
        var failure: APIError?
        var source: APIResponseCache.Source?
        /// The attempt whose transport call was in progress when the task ended: its handle is
        /// cancelled when it arrives, or, not yet sent, it never is.
        var abandonedAttempt: Int?
    }

    /// Which list of its scope the task is in: started when sent, started from the line, waiting
    /// (at the line's front, or by priority), or in a quiet wait (debounced or throttled).
    enum Membership { case none, started, startedFromLine, line, lineFront, quiet }

    fileprivate(set) var lifecycle = Lifecycle.created(cancelledBeforeSend: nil)
    /// The number of attempts started; the current (or last) attempt's number.
    fileprivate(set) var attemptCount = 0
    /// The order in which the engine accepted the task.
    fileprivate(set) var sequence: UInt64 = 0
    fileprivate(set) var deadlineTimer: (any APICancellable)?
    /// Whether the task was already sent again after its credential was refused (at most once).
    fileprivate(set) var hasReplayed = false
    /// Whether an async caller waits for this task (its typed observer lives in the typed task).
    fileprivate(set) var isObserved = false
    /// Whether the task holds a slot of its ``APIConcurrencyPolicy/Group``, or waits for one (its policy
    /// started it; it is listed as started, its lifecycle still `.waiting`).
    fileprivate(set) var holdsGroupSlot = false
    fileprivate(set) var awaitsGroupSlot = false
    /// The scope the task is listed in while in flight, and in which of its lists.
    fileprivate(set) var scope: ScopeState?
    fileprivate(set) var membership = Membership.none
    /// When a throttled task that waits for its turn may start, on the engine's clock (see
    /// ``APIConcurrencyPolicy/throttle``); `nil` for every other task.
    fileprivate(set) var throttleTurn: Double?
    /// The ``APIConcurrencyPolicy/LineLimit/maxWait`` that ends a debounced or throttled task's quiet wait before its
    /// turn; `nil` when the turn comes first.
    fileprivate(set) var quietLimit: Double?
    // Intrusive list links: a task is in at most one list of its scope at a time.
    fileprivate(set) var previous: AnyAPITask?
    fileprivate(set) var next: AnyAPITask?

    var hasEnded: Bool {
        if case .ended = lifecycle { return true }
        return false
    }

    /// Takes the lifecycle out, leaving `.waiting(timer: nil)` in its place, so that a transition changes its
    /// payload and puts it back without copying it (every path puts one back).
    fileprivate mutating func takeLifecycle() -> Lifecycle {
        var taken = Lifecycle.waiting(timer: nil)
        swap(&taken, &lifecycle)
        return taken
    }
}

/// An intrusive doubly linked list of tasks, threaded through their records: append, prepend and
/// removal in O(1) without allocating. Guarded by the engine's lock.
struct TaskList {
    private(set) var head: AnyAPITask?
    private(set) var tail: AnyAPITask?
    private(set) var count = 0

    var isEmpty: Bool { head == nil }

    fileprivate mutating func append(_ task: AnyAPITask, as membership: SchedulingRecord.Membership) {
        task.record.membership = membership
        task.record.previous = tail
        task.record.next = nil
        if let tail { tail.record.next = task } else { head = task }
        tail = task
        count += 1
    }

    fileprivate mutating func prepend(_ task: AnyAPITask, as membership: SchedulingRecord.Membership) {
        task.record.membership = membership
        task.record.previous = nil
        task.record.next = head
        if let head { head.record.previous = task } else { tail = task }
        head = task
        count += 1
    }

    /// Unlinks a task that is in this list.
    fileprivate mutating func remove(_ task: AnyAPITask) {
        let previous = task.record.previous
        let next = task.record.next
        if let previous { previous.record.next = next } else { head = next }
        if let next { next.record.previous = previous } else { tail = previous }
        task.record.previous = nil
        task.record.next = nil
        task.record.membership = .none
        count -= 1
    }

    /// The tasks from head to tail, as an array (for sweeps that end tasks while walking).
    func snapshot() -> [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        tasks.reserveCapacity(count)
        var cursor = head
        while let task = cursor {
            tasks.append(task)
            cursor = task.record.next
        }
        return tasks
    }
}

/// A scope's waiting tasks, in the order they start: ``APIConcurrencyPolicy/waitUntilDoneHighPriority``
/// tasks first, newest first; then by ``AnyAPITask/priority``, highest first, equal priorities in
/// sending order. Joining, leaving and the head are O(1) for the front and for priority 0 (the
/// default), and O(P) for another priority, P being the number of distinct priorities waiting.
struct WaitingLine {
    private var front = TaskList()
    /// Priority 0, the default: no lookup.
    private var normal = TaskList()
    private var others: [Int: TaskList] = [:]
    /// The priorities above 0 that have waiting tasks, highest first; then those below 0.
    private var higher: [Int] = []
    private var lower: [Int] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    var head: AnyAPITask? {
        if let head = front.head { return head }
        if let priority = higher.first { return others[priority]?.head }
        if let head = normal.head { return head }
        if let priority = lower.first { return others[priority]?.head }
        return nil
    }

    /// Joins by priority, behind the tasks of its priority.
    fileprivate mutating func join(_ task: AnyAPITask) {
        count += 1
        let priority = task.priority
        if priority == 0 {
            normal.append(task, as: .line)
            return
        }
        if others[priority] == nil {
            if priority > 0 {
                higher.insert(priority, at: higher.firstIndex { $0 < priority } ?? higher.endIndex)
            } else {
                lower.insert(priority, at: lower.firstIndex { $0 < priority } ?? lower.endIndex)
            }
        }
        others[priority, default: TaskList()].append(task, as: .line)
    }

    /// Joins at the front, ahead of every waiting task.
    fileprivate mutating func joinFront(_ task: AnyAPITask) {
        count += 1
        front.prepend(task, as: .lineFront)
    }

    fileprivate mutating func remove(_ task: AnyAPITask) {
        count -= 1
        let priority = task.priority
        if task.record.membership == .lineFront {
            front.remove(task)
        } else if priority == 0 {
            normal.remove(task)
        } else {
            others[priority]?.remove(task)
            if others[priority]?.isEmpty ?? true {
                others[priority] = nil
                higher.removeAll { $0 == priority }
                lower.removeAll { $0 == priority }
            }
        }
    }

    /// The waiting tasks, head first.
    func snapshot() -> [AnyAPITask] {
        var tasks = front.snapshot()
        for priority in higher { tasks += others[priority]?.snapshot() ?? [] }
        tasks += normal.snapshot()
        for priority in lower { tasks += others[priority]?.snapshot() ?? [] }
        return tasks
    }
}

/// The in-flight tasks of one concurrency scope of one engine. Guarded by the engine's lock, which
/// makes the runtime's exclusivity checks of its lists redundant: they are off.
final class ScopeState {
    let key: String?
    /// Tasks started when they were sent, in submission order (so `head` has the smallest `sequence`).
    @exclusivity(unchecked) fileprivate(set) var started = TaskList()
    /// Tasks started from the line: one at a time, since each waits for those before it, except
    /// ``APIConcurrencyPolicy/limited`` tasks, which start while fewer than their limit run.
    @exclusivity(unchecked) fileprivate(set) var startedFromLine = TaskList()
    /// Tasks waiting to start, head first.
    @exclusivity(unchecked) fileprivate(set) var line = WaitingLine()
    /// Debounced and throttled tasks waiting for their timer, outside the line.
    @exclusivity(unchecked) fileprivate(set) var quiet = TaskList()

    init(key: String?) { self.key = key }

    var isIdle: Bool { started.isEmpty && startedFromLine.isEmpty && line.isEmpty && quiet.isEmpty }
    /// The tasks of the scope running an attempt or waiting for a retry.
    var runningCount: Int { started.count + startedFromLine.count }
    var hasRunning: Bool { !started.isEmpty || !startedFromLine.isEmpty }

    /// Whether the head of the line may start: a ``APIConcurrencyPolicy/limited`` head when fewer
    /// than its limit run; any other when nothing started from the line is still in flight and every
    /// task started directly that was sent before it has ended.
    func canStart(_ candidate: AnyAPITask) -> Bool {
        if candidate.concurrencyPolicy == .limited { return runningCount < candidate.concurrencyLimit }
        guard startedFromLine.isEmpty else { return false }
        guard let oldest = started.head else { return true }
        return oldest.record.sequence > candidate.record.sequence
    }
}
