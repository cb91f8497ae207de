extension SchedulingMachine {
    // MARK: Transitions

    mutating func scope(for key: String?) -> ScopeState {
        guard let key else { return defaultScope }
        if let scope = namedScopes[key] { return scope }
        let scope = ScopeState(key: key)
        namedScopes[key] = scope
        return scope
    }

    /// The task joins the line (at its front, or by priority), unless the line is already as long as
    /// its ``APIConcurrencyPolicy/LineLimit/maxLength`` allows; its ``APIConcurrencyPolicy/LineLimit/maxWait`` timer is to be set.
    mutating func wait(
        _ task: AnyAPITask, in scope: ScopeState, at place: ScopeState.Place, into actions: inout Actions
    ) {
        if let maxLength = task.bag.lineLimit?.effectiveMaxLength, scope.line.count >= maxLength {
            end(task, with: .failure(.lineFull(maxLength: maxLength)), into: &actions)
            return
        }
        scope.join(task, at: place)
        emit(.waiting, for: task, into: &actions)
        if let maxWait = task.bag.lineLimit?.effectiveMaxWait {
            actions.append(.scheduleWaitLimit(task, after: maxWait))
        }
        // A scope busy only with tasks in a quiet wait has nothing running: the head may start now.
        if !scope.hasRunning { pump(scope, into: &actions) }
    }

    /// The task waits outside the line for `interval` seconds (a debounce's quiet wait, a throttled
    /// task's turn), then starts directly.
    mutating func waitQuietly(
        _ task: AnyAPITask, in scope: ScopeState, for interval: Double, into actions: inout Actions
    ) {
        scope.waitQuietly(task)
        emit(.waiting, for: task, into: &actions)
        // A wait longer than the task's line limit allows ends at the limit (APIConcurrencyPolicy.LineLimit.maxWait).
        if let maxWait = task.bag.lineLimit?.effectiveMaxWait, maxWait < interval {
            task.record.quietLimit = maxWait
            actions.append(.scheduleQuietEnd(task, after: maxWait))
        } else {
            actions.append(.scheduleQuietEnd(task, after: interval))
        }
    }

    /// Lists the task as started in its scope and admits it; `waitedAlready` when its `waiting` event
    /// was told (a quiet wait).
    mutating func startDirectly(
        _ task: AnyAPITask, in scope: ScopeState, waitedAlready: Bool = false, into actions: inout Actions
    ) {
        scope.startDirectly(task)
        admit(task, waitedAlready: waitedAlready, into: &actions)
    }

    /// The task's policy starts it: its first attempt begins, once it holds a slot of its group.
    /// Without one free it waits for the group (``groupSlotGranted(_:)``).
    mutating func admit(_ task: AnyAPITask, waitedAlready: Bool, into actions: inout Actions) {
        if let group = task.bag.concurrencyGroup, !task.record.holdsGroupSlot {
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
    mutating func groupSlotGranted(_ task: AnyAPITask) -> Actions {
        var actions = Actions()
        guard task.record.awaitsGroupSlot, !task.record.hasEnded else {
            if let next = task.bag.concurrencyGroup?.release() { actions.append(.grantSlot(next)) }
            return actions
        }
        task.record.awaitsGroupSlot = false
        task.record.holdsGroupSlot = true
        beginAttempt(task, into: &actions)
        return actions
    }

    mutating func beginAttempt(_ task: AnyAPITask, into actions: inout Actions) {
        if case .waiting(let timer?) = task.record.lifecycle { actions.append(.cancel(Handle(timer))) }
        // Offline, a task that waits for the network waits before it begins an attempt.
        if connectivity.isOffline, task.bag.connectivityWait != nil {
            waitForConnectivity(task, error: nil, into: &actions)
            return
        }
        task.record.attemptCount += 1
        let attempt = task.record.attemptCount
        task.record.lifecycle = .running(SchedulingRecord.RunningAttempt(number: attempt))
        emit(.started(attempt: attempt), for: task, into: &actions)
        actions.append(.start(task, attempt: attempt))
    }

    /// Starts the head of the line while it may start.
    mutating func pump(_ scope: ScopeState, into actions: inout Actions) {
        if lineIsStopped(scope.key) { return }
        let holdsBack = lineHasBacklog(scope.key)
        while let head = scope.line.head, Self.mayStartFromLine(head, in: scope) {
            // Restored records still on disk go before this run's tasks.
            if holdsBack, Self.durablePlace(of: head) == .byPriority { return }
            scope.startFromLine(head)
            admit(head, waitedAlready: true, into: &actions)
        }
    }

    /// Ends the task: what it still runs is cancelled, its terminal event queued, its async caller
    /// told, and its place in the scope given up. `attemptIsOver` when its current attempt itself
    /// ended it (its transport call, if still in progress, is done).
    mutating func end(
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
            // An attempt that ended the task itself has nothing left to cancel; another is told (it
            // cancels what it waits on), and one whose request is still being built is never sent.
            if !attemptIsOver {
                if let handle = running.handle { actions.append(.cancel(Handle(handle))) }
                if !running.isSent { ending.abandonedAttempt = running.number }
            }
        case .waitingForRetry(_, let timer?), .waiting(let timer?):
            actions.append(.cancel(Handle(timer)))
        case .created, .waiting, .waitingForRetry, .waitingForConnectivity:
            break
        }
        if let timer = task.record.connectivityWait?.timer {
            actions.append(.cancel(Handle(timer)))
            task.record.connectivityWait?.timer = nil
        }
        if let timer = task.record.deadlineTimer {
            actions.append(.cancel(Handle(timer)))
            task.record.deadlineTimer = nil
        }
        if let group = task.bag.concurrencyGroup {
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
        if let settlement = Self.durableSettlement(of: task, outcome: outcome) {
            // A final refusal stops the line now: no task behind it starts, whatever the store does.
            if settlement == .keepRefused { stoppedScopes.insert(task.concurrencyScope) }
            actions.append(.settleDurable(task, settlement))
        }
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
        // Its own streams end with it, after the reports already taken (not when the app is told:
        // the delivery queue may be busy, and a released engine delivers nothing).
        if task.bag.progressStreams != nil || task.bag.bodyStream != nil {
            actions.append(.feedStreams(task, .end(failure: ending.failure, afterReports: task.record.streamReports)))
        }
        // Leave the scope after the terminal event, so the task that takes its place starts after it.
        if let scope = task.record.scope {
            if task.record.membership == .quiet, task.concurrencyPolicy == .throttle {
                throttleTurns.remove(task, for: task.concurrencyScope)
            }
            scope.remove(task)
            task.record.scope = nil
            if shouldPump { pump(scope, into: &actions) }
            // A named scope exists exactly as long as it has a task in flight.
            if let key = scope.key, scope.isIdle, namedScopes[key] === scope { namedScopes[key] = nil }
        }
    }

    mutating func emit(_ event: AnyAPITask.Event, for task: AnyAPITask, into actions: inout Actions) {
        if outbox.append(event, for: task) { actions.deliverEvents = true }
    }
}
