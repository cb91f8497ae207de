/// Whether the network is reachable, as the engine knows it: from its ``APIEngine/Connectivity``
/// (the path), and from failures (an attempt of a task that waits for the network failed with an
/// offline error, ``APIEngine/isOfflineError(_:)``). Offline, a task that waits for the network
/// (``APIRequest/connectivityWait``) waits before it begins an attempt; the others go as before.
struct ConnectivityState {
    /// What the engine's connectivity last said; `true` without one.
    var pathIsReachable = true
    /// An attempt found the network unreachable since the path last said it was reachable, or the
    /// last probe.
    var failedOffline = false
    /// A probe is scheduled (``SchedulingMachine/Action/scheduleProbe(after:)``).
    var probeIsScheduled = false
    /// The delay of the next probe: 2 s after the first failure, doubling to 60 s while failures go
    /// on; back to 2 s when the network answers.
    var probeDelay = ConnectivityState.firstProbeDelay

    static let firstProbeDelay: Double = 2
    static let longestProbeDelay: Double = 60

    var isOffline: Bool { !pathIsReachable || failedOffline }
}

extension SchedulingMachine {
    /// The current attempt of a task that waits for the network failed for want of one: the task
    /// waits (holding its place, the attempt not counted against its retries) and the engine,
    /// offline now, schedules a probe unless its path already says it is unreachable.
    mutating func attemptFoundOffline(_ task: AnyAPITask, attempt: Int, error: APIError) -> Actions {
        var actions = Actions()
        guard isCurrent(task, attempt: attempt) else { return actions }
        waits(task).offlineAttempts += 1
        connectivity.failedOffline = true
        waitForConnectivity(task, error: error, into: &actions)
        scheduleProbeIfNeeded(into: &actions)
        return actions
    }

    /// The engine's connectivity says the path is reachable, or not. Reachable, every task that
    /// waits for the network begins its attempt, in the order they were sent.
    mutating func connectivityChanged(isReachable: Bool) -> Actions {
        var actions = Actions()
        connectivity.pathIsReachable = isReachable
        guard isReachable else { return actions }
        connectivity.failedOffline = false
        connectivity.probeDelay = ConnectivityState.firstProbeDelay
        resumeTasksWaitingForConnectivity(into: &actions)
        return actions
    }

    /// The probe's delay passed: the tasks that wait for the network try again (if their attempts
    /// fail offline again, the next probe waits twice as long).
    mutating func probeFired() -> Actions {
        var actions = Actions()
        connectivity.probeIsScheduled = false
        guard connectivity.pathIsReachable, connectivity.failedOffline else { return actions }
        connectivity.failedOffline = false
        resumeTasksWaitingForConnectivity(into: &actions)
        return actions
    }

    /// Whether an attempt that reached a server changes anything: the engine thought itself offline
    /// (or backs its probes off), or the task's wait for the network has a limit running.
    func networkAnswerMatters(to task: AnyAPITask) -> Bool {
        connectivity.failedOffline || connectivity.probeDelay != ConnectivityState.firstProbeDelay
            || task.record.connectivityWait?.limitIsRunning == true
    }

    /// An attempt reached a server (``attemptEnded(_:attempt:outcome:source:retryDelay:end:)``, with
    /// a response): the network is reachable, whatever failures said before.
    mutating func networkAnswered(into actions: inout Actions) {
        guard connectivity.failedOffline || connectivity.probeDelay != ConnectivityState.firstProbeDelay else {
            return
        }
        connectivity.probeDelay = ConnectivityState.firstProbeDelay
        guard connectivity.failedOffline, connectivity.pathIsReachable else { return }
        connectivity.failedOffline = false
        resumeTasksWaitingForConnectivity(into: &actions)
    }

    /// The task waits for the network (its state reads `waiting`; the delegate, told `waiting` at
    /// most once and before anything else, is not told again); its wait limit starts the first time
    /// (and ends it at once when it is `0`, or when it passed during a probe's attempt).
    mutating func waitForConnectivity(_ task: AnyAPITask, error: APIError?, into actions: inout Actions) {
        let limit = task.bag.connectivityWait ?? .infinity
        let wait = waits(task)
        if wait.limitHasPassed || (!wait.limitIsRunning && limit <= 0) {
            end(task, with: .failure(error ?? APIEngine.offlineError), into: &actions)
            return
        }
        if !wait.limitIsRunning, limit.isFinite {
            wait.limitIsRunning = true
            actions.append(.scheduleWaitLimit(task, after: limit))
        }
        task.record.lifecycle = .waitingForConnectivity(error: error)
        emit(.waitingForNetwork, for: task, into: &actions)
    }

    /// The task's attempt reached a server: its wait for the network is over (a later one starts
    /// its limit afresh).
    mutating func taskReachedNetwork(_ task: AnyAPITask, into actions: inout Actions) {
        guard let wait = task.record.connectivityWait else { return }
        if let timer = wait.timer { actions.append(.cancel(Handle(timer))) }
        wait.timer = nil
        wait.limitIsRunning = false
        wait.limitHasPassed = false
    }

    /// The task's waits for the network, made the first time it waits.
    private func waits(_ task: AnyAPITask) -> SchedulingRecord.ConnectivityWait {
        if let wait = task.record.connectivityWait { return wait }
        let wait = SchedulingRecord.ConnectivityWait()
        task.record.connectivityWait = wait
        return wait
    }

    private mutating func scheduleProbeIfNeeded(into actions: inout Actions) {
        guard connectivity.pathIsReachable, !connectivity.probeIsScheduled else { return }
        connectivity.probeIsScheduled = true
        actions.append(.scheduleProbe(after: connectivity.probeDelay))
        connectivity.probeDelay = min(connectivity.probeDelay * 2, ConnectivityState.longestProbeDelay)
    }

    private mutating func resumeTasksWaitingForConnectivity(into actions: inout Actions) {
        let waiting = inFlightTasks.filter {
            if case .waitingForConnectivity = $0.record.lifecycle { return true }
            return false
        }
        for task in waiting.sorted(by: { $0.record.sequence < $1.record.sequence }) {
            beginAttempt(task, into: &actions)
        }
    }
}
