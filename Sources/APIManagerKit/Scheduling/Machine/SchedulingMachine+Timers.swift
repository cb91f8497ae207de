extension SchedulingMachine {
    /// The timer of ``Action/scheduleRetry(_:attempt:after:)`` was set: kept, or cancelled when the
    /// task no longer waits for that retry.
    mutating func retryTimerSet(
        _ task: AnyAPITask, attempt: Int, timer: any APICancellable
    ) -> Actions {
        var actions = Actions()
        if case .waitingForRetry(attempt, nil) = task.record.lifecycle {
            task.record.lifecycle = .waitingForRetry(attempt: attempt, timer: timer)
        } else {
            actions.append(.cancel(Handle(timer)))
        }
        return actions
    }

    mutating func retryTimerFired(_ task: AnyAPITask, attempt: Int) -> Actions {
        var actions = Actions()
        guard case .waitingForRetry(attempt, _) = task.record.lifecycle else { return actions }
        beginAttempt(task, into: &actions)
        return actions
    }

    /// The timer of ``Action/scheduleWaitLimit(_:after:)`` was set: kept while the task waits, else
    /// cancelled.
    mutating func waitTimerSet(_ task: AnyAPITask, timer: any APICancellable) -> Actions {
        var actions = Actions()
        if case .waiting(nil) = task.record.lifecycle {
            task.record.lifecycle = .waiting(timer: timer)
        } else if let wait = task.record.connectivityWait, wait.limitIsRunning, wait.timer == nil,
            !wait.limitHasPassed
        {
            wait.timer = timer
        } else {
            actions.append(.cancel(Handle(timer)))
        }
        return actions
    }

    /// The task's wait limit passed: still waiting, it leaves the line and ends; nothing was sent.
    mutating func waitLimitFired(_ task: AnyAPITask, maxWait: Double) -> Actions {
        var actions = Actions()
        if let wait = task.record.connectivityWait, wait.timer != nil {
            // Its wait for the network passed: waiting, it ends with what found it offline; trying
            // (a probe), it ends if that attempt finds the network gone again.
            wait.timer = nil
            wait.limitHasPassed = true
            if case .waitingForConnectivity(let error) = task.record.lifecycle {
                end(task, with: .failure(error ?? APIEngine.offlineError), into: &actions)
            }
            return actions
        }
        guard case .waiting = task.record.lifecycle, task.record.membership != .none else { return actions }
        task.record.lifecycle = .waiting(timer: nil)  // it fired
        end(task, with: .failure(.waitedTooLong(maxWait: maxWait)), into: &actions)
        return actions
    }

    /// The quiet wait of a debounced task ended: still waiting, it starts (a `debounceLatest` one
    /// ending every other task of its scope first).
    mutating func quietEnded(_ task: AnyAPITask) -> Actions {
        var actions = Actions()
        guard case .waiting = task.record.lifecycle, task.record.membership == .quiet,
            let scope = task.record.scope
        else { return actions }
        task.record.lifecycle = .waiting(timer: nil)  // it fired
        if let maxWait = task.record.quietLimit {
            // Its wait limit came before its turn: it ends, and gives the turn back (see `end`).
            end(task, with: .failure(.waitedTooLong(maxWait: maxWait)), into: &actions)
            return actions
        }
        scope.remove(task)
        if task.concurrencyPolicy == .debounceLatest {
            startCancellingOthers(task, in: scope, waitedAlready: true, into: &actions)
        } else {
            startDirectly(task, in: scope, waitedAlready: true, into: &actions)
        }
        return actions
    }

    /// The turn timer of a throttled scope key fired (see ``ThrottleTurns``): the first throttled
    /// task waiting there starts, and the timer of the next one's turn is to be set.
    mutating func throttleTurnCame(for scope: String?, now: Double) -> Actions {
        var actions = Actions()
        let (task, timerAfter) = throttleTurns.turnCame(for: scope, now: now)
        if let timerAfter { actions.append(.scheduleThrottleTurn(scope, after: timerAfter)) }
        guard let task, case .waiting = task.record.lifecycle, task.record.membership == .quiet,
            let taskScope = task.record.scope
        else { return actions }
        taskScope.remove(task)
        startDirectly(task, in: taskScope, waitedAlready: true, into: &actions)
        return actions
    }

    /// The timer of ``Action/scheduleDeadline(_:after:)`` was set: kept, or cancelled when the task
    /// has ended.
    mutating func deadlineTimerSet(_ task: AnyAPITask, timer: any APICancellable) -> Actions {
        var actions = Actions()
        if task.record.hasEnded || task.record.deadlineTimer != nil {
            actions.append(.cancel(Handle(timer)))
        } else {
            task.record.deadlineTimer = timer
        }
        return actions
    }

    mutating func deadlineFired(_ task: AnyAPITask, deadline: Double) -> Actions {
        var actions = Actions()
        switch task.record.lifecycle {
        case .created, .ended: return actions
        case .waiting, .running, .waitingForRetry, .waitingForConnectivity: break
        }
        task.record.deadlineTimer = nil  // it fired
        let attempts = task.record.attemptCount
        end(task, with: .failure(.timedOut(deadline: deadline, attempts: attempts)), into: &actions)
        return actions
    }
}
