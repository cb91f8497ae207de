extension SchedulingMachine {
    /// The attempt's request is built: ``Action/send(_:attempt:)`` if it is still the task's current
    /// attempt and its origin's circuit admits it; a refused one ends the task with
    /// ``APIError/circuitOpen(origin:closesIn:)`` (nothing is sent). A stored copy of the response,
    /// if any, is delivered first (``APIResponseCache/Option/both``). An attempt abandoned while it
    /// was being built is settled here instead (and gives its admission back).
    mutating func requestBuilt(
        _ task: AnyAPITask, attempt: Int, isReplay: Bool = false, cachedCopy: AnyAPITask.BuiltResponse? = nil,
        network: NetworkContext? = nil, isMonitored: Bool = false
    ) -> Actions {
        var actions = Actions()
        if let cachedCopy { deliverCachedCopy(cachedCopy, of: task, attempt: attempt, into: &actions) }
        if let network, let refusal = admit(task, attempt: attempt, isReplay: isReplay, network: network) {
            refuse(task, attempt: attempt, with: refusal, isMonitored: isMonitored, into: &actions)
            return actions
        }
        switch task.record.takeLifecycle() {
        case .running(var running) where running.number == attempt:
            running.isSent = true
            task.record.lifecycle = .running(running)
            actions.append(.send(task, attempt: attempt))
            return actions
        case .ended(var ending) where ending.abandonedAttempt == attempt:
            ending.abandonedAttempt = nil
            task.record.lifecycle = .ended(ending)
        case let other:
            task.record.lifecycle = other
        }
        // Ended while its request was built: admitted, never sent, no answer to come.
        if let network { resilience.abandon(origin: network.origin, task: task.identifier, now: network.now) }
        return actions
    }

    /// The circuit refused the attempt whose request was built: the monitor is told, and the task,
    /// if the attempt is still its current one, ends with the refusal; nothing is sent.
    private mutating func refuse(
        _ task: AnyAPITask, attempt: Int, with refusal: APIError, isMonitored: Bool, into actions: inout Actions
    ) {
        if isMonitored { actions.append(.report(.failedUnsent(refusal))) }
        switch task.record.takeLifecycle() {
        case .running(let running) where running.number == attempt:
            task.record.lifecycle = .running(running)
            end(task, with: .failure(refusal), into: &actions, attemptIsOver: true)
        case .ended(var ending) where ending.abandonedAttempt == attempt:
            ending.abandonedAttempt = nil
            task.record.lifecycle = .ended(ending)
        case let other:
            task.record.lifecycle = other
        }
    }

    /// The engine made the attempt: the machine keeps `handle` (the attempt's link, ``AttemptLink``)
    /// to cancel it if the task ends while it runs, and says how the task's retry policy counts the
    /// attempt (the attempts started, less those that ended for want of a network); `nil` when it
    /// is no longer the task's current attempt, which then never runs. A replay's attempt (the same
    /// number, after a refresh) takes the place of the one it replays.
    mutating func attemptStarted(_ task: AnyAPITask, attempt: Int, handle: any APICancellable) -> Int? {
        switch task.record.takeLifecycle() {
        case .running(var running) where running.number == attempt:
            running.handle = handle
            running.isSent = false
            task.record.lifecycle = .running(running)
            return attempt - (task.record.connectivityWait?.offlineAttempts ?? 0)
        case let other:
            task.record.lifecycle = other
            return nil
        }
    }

    /// The attempt's credential was refused: ``Action/replay(_:attempt:)`` when it may be sent again
    /// after a refresh, which each task may do once.
    mutating func credentialRefused(_ task: AnyAPITask, attempt: Int) -> Actions {
        var actions = Actions()
        guard isCurrent(task, attempt: attempt), !task.record.hasReplayed else { return actions }
        task.record.hasReplayed = true
        actions.append(.replay(task, attempt: attempt))
        return actions
    }

    /// The attempt's response was built, or the attempt failed: the task retries after `retryDelay`
    /// (a failure the hook wants retried), unless the engine's retry budget refuses it, or ends.
    /// `end` says what else counts: whether it was sent (its outcome then counts for its origin's
    /// circuit), the answer it shares with a flight, whether it was on a shared flight (which its
    /// retry's wait then rests, ``Action/restFlight(_:)``). An attempt that is no longer current
    /// changes only its origin's record.
    mutating func attemptEnded(
        _ task: AnyAPITask, attempt: Int, outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseCache.Source, retryDelay: Double?, end: AttemptEnd = AttemptEnd(sent: true)
    ) -> Actions {
        var actions = Actions()
        var failure: APIError?
        if case .failure(let error) = outcome {
            failure = error
            if !end.sent, end.isMonitored { actions.append(.report(.failedUnsent(error))) }
        }
        if end.sent, networkAnswerMatters(to: task), failure == nil || failure?.response != nil {
            networkAnswered(into: &actions)
            taskReachedNetwork(task, into: &actions)
        }
        // Without a circuit breaker or a retry budget there is nothing to record (no call).
        let retryDelay =
            end.network == nil
            ? retryDelay : recordOutcome(of: task, failure: failure, retryDelay: retryDelay, end: end, into: &actions)
        if isCurrent(task, attempt: attempt) {
            switch (failure, retryDelay) {
            case (let error?, let delay?):
                task.record.lifecycle = .waitingForRetry(attempt: attempt, timer: nil)
                emit(.willRetry(delay: delay, error: error), for: task, into: &actions)
                if delay == 0 {
                    beginAttempt(task, into: &actions)
                } else {
                    // A shared attempt's retry rests its flight before the retry's timer can fire.
                    if end.boardedFlight { actions.append(.restFlight(task)) }
                    actions.append(.scheduleRetry(task, attempt: attempt, after: delay))
                }
            default:
                self.end(task, with: outcome, source: source, into: &actions, attemptIsOver: true)
            }
        }
        return actions
    }

    /// A stored response answers the attempt (`terminal`) or comes ahead of the network.
    mutating func cachedResponse(
        _ task: AnyAPITask, attempt: Int, response: AnyAPITask.BuiltResponse, terminal: Bool
    ) -> Actions {
        var actions = Actions()
        if terminal {
            guard isCurrent(task, attempt: attempt) else { return actions }
            end(task, with: .success(response), source: .cache, into: &actions, attemptIsOver: true)
        } else {
            deliverCachedCopy(response, of: task, attempt: attempt, into: &actions)
        }
        return actions
    }

    /// A stored copy that comes ahead of the network: told to the delegate and the async caller.
    private mutating func deliverCachedCopy(
        _ response: AnyAPITask.BuiltResponse, of task: AnyAPITask, attempt: Int, into actions: inout Actions
    ) {
        guard isCurrent(task, attempt: attempt) else { return }
        emit(.cachedResponse(response), for: task, into: &actions)
        if task.record.isObserved { actions.append(.tell(task, .cached(response))) }
    }

    /// The current attempt of a task reported progress: told to the delegate, in order with its
    /// other events. A report of an attempt that is no longer current is dropped.
    mutating func progressReported(
        _ task: AnyAPITask, attempt: Int, progress: APITransferProgress
    ) -> Actions {
        var actions = Actions()
        guard isCurrent(task, attempt: attempt) else { return actions }
        emit(.progress(progress), for: task, into: &actions)
        if task.bag.progressStreams != nil {
            task.record.streamReports &+= 1
            actions.append(.feedStreams(task, .progress(progress, number: task.record.streamReports)))
        }
        return actions
    }
}
