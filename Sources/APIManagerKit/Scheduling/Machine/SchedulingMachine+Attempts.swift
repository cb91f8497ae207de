extension SchedulingMachine {
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

    /// The current attempt of a task reported progress: told to the delegate, in order with its
    /// other events. A report of an attempt that is no longer current is dropped.
    mutating func progressReported(
        _ task: AnyAPITask, attempt: Int, progress: APITransferProgress, into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        emit(.progress(progress), for: task, into: &actions)
    }
}
