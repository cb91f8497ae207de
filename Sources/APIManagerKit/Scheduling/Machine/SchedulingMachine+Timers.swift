extension SchedulingMachine {
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
        scope.remove(task)
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
}
