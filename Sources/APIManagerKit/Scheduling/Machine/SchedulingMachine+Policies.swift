/// The concurrency policies, one function each: what a task sent under it does with its scope (see
/// "Concurrency policies" in the docs for the table these implement).
///
/// A new policy touches three files: its case, with what it reads of the request and whether it
/// reads the clock, in `APIConcurrencyPolicy.swift`; its function and its line in
/// ``apply(_:to:in:now:into:)`` here (and, if the head of a line under it starts by another rule,
/// its line in ``mayStartFromLine(_:in:)``); and, for a setting of its own, the requirement with its
/// default in `APIRequest.swift`.
extension SchedulingMachine {
    /// Applies the task's policy to it, just sent into `scope` (its record lists the scope).
    mutating func apply(
        _ policy: APIConcurrencyPolicy, to task: AnyAPITask, in scope: ScopeState, now: Double,
        into actions: inout Actions
    ) {
        switch policy {
        case .default: startDirectly(task, in: scope, into: &actions)
        case .cancelOthers: cancelOthers(for: task, in: scope, into: &actions)
        case .waitUntilDone: waitUntilDone(task, in: scope, into: &actions)
        case .durable: durable(task, in: scope, into: &actions)
        case .waitUntilDoneHighPriority: waitUntilDoneHighPriority(task, in: scope, into: &actions)
        case .conflate: conflate(task, in: scope, into: &actions)
        case .limited: limited(task, in: scope, into: &actions)
        case .debounce, .debounceLatest: debounce(task, in: scope, into: &actions)
        case .throttle: throttle(task, in: scope, now: now, into: &actions)
        case .ignoreCurrent: ignoreCurrent(task, in: scope, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/cancelOthers``: every other task of the scope ends, then it starts.
    private mutating func cancelOthers(for task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        startCancellingOthers(task, in: scope, waitedAlready: false, into: &actions)
    }

    /// Ends every other in-flight task of `scope` as cancelled by policy (none retries), then starts
    /// `task` (not in the scope's sets): a ``APIConcurrencyPolicy/cancelOthers`` task when it is sent,
    /// a ``APIConcurrencyPolicy/debounceLatest`` one when its quiet wait ends.
    mutating func startCancellingOthers(
        _ task: AnyAPITask, in scope: ScopeState, waitedAlready: Bool, into actions: inout Actions
    ) {
        for other in scope.started.snapshot() + scope.startedFromLine.snapshot() + scope.line.snapshot()
            + scope.quiet.snapshot()
        {
            end(other, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
        }
        // Ending the last task of a named scope closed it; the new task opens it again, so the
        // scope it runs in is the one later tasks of the same key find.
        startDirectly(task, in: reopen(scope, for: task), waitedAlready: waitedAlready, into: &actions)
    }

    /// ``APIConcurrencyPolicy/waitUntilDone``: starts in an idle scope, else joins the line.
    private mutating func waitUntilDone(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        if scope.isIdle {
            startDirectly(task, in: scope, into: &actions)
        } else {
            wait(task, in: scope, at: .byPriority, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/durable``: as `waitUntilDone`, but a restored task waits behind the
    /// restored ones, ahead of this run's; a task that retries a refusal waits at the front; while the
    /// line has restored records still on disk, or a final refusal stopped it, this run's tasks only
    /// join it (and it starts when the backlog is drained, or the app resolves the refusal).
    private mutating func durable(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        let place = Self.durablePlace(of: task)
        if scope.isIdle, !lineIsStopped(scope.key), place != .byPriority || !lineHasBacklog(scope.key) {
            startDirectly(task, in: scope, into: &actions)
        } else {
            wait(task, in: scope, at: place, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/waitUntilDoneHighPriority``: starts when nothing runs, else joins the
    /// line at its front.
    private mutating func waitUntilDoneHighPriority(
        _ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions
    ) {
        if scope.hasRunning {
            wait(task, in: scope, at: .front, into: &actions)
        } else {
            startDirectly(task, in: scope, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/conflate``: starts in an idle scope, else replaces every waiting task.
    private mutating func conflate(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        if scope.isIdle {
            startDirectly(task, in: scope, into: &actions)
        } else if task.bag.lineLimit?.effectiveMaxLength == 0 {
            // It could not wait even alone: it replaces nothing.
            end(task, with: .failure(.lineFull(maxLength: 0)), into: &actions)
        } else {
            // Replaces every waiting task; the running ones go on, so the scope stays open.
            for waiting in scope.line.snapshot() {
                end(waiting, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
            }
            wait(task, in: scope, at: .byPriority, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/limited``: starts while fewer than its limit run and none waits.
    private mutating func limited(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        if scope.line.isEmpty && scope.runningCount < task.bag.concurrencyLimit {
            startDirectly(task, in: scope, into: &actions)
        } else {
            wait(task, in: scope, at: .byPriority, into: &actions)
        }
    }

    /// ``APIConcurrencyPolicy/debounce`` and ``APIConcurrencyPolicy/debounceLatest``: replaces the
    /// tasks of its own policy still in their quiet wait, and waits quietly itself; throttled ones keep
    /// their turns. (A `debounceLatest` task's start, ``quietEnded(_:)``, cancels the others.)
    private mutating func debounce(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        for quiet in scope.quiet.snapshot() where quiet.concurrencyPolicy == task.concurrencyPolicy {
            end(quiet, with: .failure(.cancelled(reason: .policy)), into: &actions, pump: false)
        }
        waitQuietly(task, in: reopen(scope, for: task), for: task.bag.pacing.debounceInterval, into: &actions)
    }

    /// ``APIConcurrencyPolicy/throttle``: starts on its scope's turn, waits for the turn behind the
    /// throttled tasks already waiting, or (in ``APIConcurrencyPolicy/ThrottleMode/ignore`` mode,
    /// early) is ignored. A waiting one starts when the key's turn timer fires with it first
    /// (``throttleTurnCame(for:now:)``); its line limit's `maxWait` bounds its wait.
    private mutating func throttle(
        _ task: AnyAPITask, in scope: ScopeState, now: Double, into actions: inout Actions
    ) {
        let decision = throttleTurns.take(
            task, for: task.concurrencyScope, now: now, interval: task.bag.pacing.throttleInterval,
            waits: task.bag.pacing.throttleWaits)
        switch decision {
        case .start:
            startDirectly(task, in: scope, into: &actions)
        case .ignore:
            end(task, with: .failure(.ignored), into: &actions)
        case .wait(let timerAfter):
            scope.waitQuietly(task)
            emit(.waiting, for: task, into: &actions)
            if let maxWait = task.bag.lineLimit?.effectiveMaxWait {
                actions.append(.scheduleWaitLimit(task, after: maxWait))
            }
            if let timerAfter { actions.append(.scheduleThrottleTurn(task.concurrencyScope, after: timerAfter)) }
        }
    }

    /// ``APIConcurrencyPolicy/ignoreCurrent``: starts in an idle scope, else is ignored.
    private mutating func ignoreCurrent(_ task: AnyAPITask, in scope: ScopeState, into actions: inout Actions) {
        if scope.isIdle {
            startDirectly(task, in: scope, into: &actions)
        } else {
            end(task, with: .failure(.ignored), into: &actions)
        }
    }

    /// Whether the head of a scope's line may start: a ``APIConcurrencyPolicy/limited`` head when
    /// fewer than its limit run; any other when nothing started from the line is still in flight and
    /// every task started directly that was sent before it has ended.
    static func mayStartFromLine(_ head: AnyAPITask, in scope: ScopeState) -> Bool {
        // (A durable line's backlog holds this run's tasks back: see ``pump(_:into:)``.)
        if head.concurrencyPolicy == .limited { return scope.runningCount < head.bag.concurrencyLimit }
        guard scope.startedFromLine.isEmpty else { return false }
        guard let oldest = scope.started.head else { return true }
        return oldest.record.sequence > head.record.sequence
    }

    /// The scope the task runs in after its policy ended others of its scope: ending the last task
    /// of a named scope closed it, and the task opens it again (the one later tasks of its key find).
    private mutating func reopen(_ scope: ScopeState, for task: AnyAPITask) -> ScopeState {
        let reopened = self.scope(for: task.concurrencyScope)
        task.record.scope = reopened
        return reopened
    }
}
