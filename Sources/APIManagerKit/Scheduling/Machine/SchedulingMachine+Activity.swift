/// What the observable models show (``APIEngine/Activity``), counted by the machine: a task's record
/// is read here only.
extension ActivityFigures {
    /// The figures of the in-flight tasks `filter` counts; called under the engine's lock.
    init(of filter: ActivityFilter, in machine: SchedulingMachine) {
        for task in machine.inFlightTasks where filter.counts(task) {
            inFlight += 1
            if task.concurrencyPolicy == .durable { durablePending += 1 }
            switch task.record.lifecycle {
            case .running: running += 1
            case .waitingForRetry: waitingForRetry += 1
            case .waitingForConnectivity:
                waiting += 1
                waitingForNetwork += 1
            case .created, .waiting: waiting += 1
            case .ended: break
            }
        }
        let connectivity = machine.connectivity
        networkState =
            !connectivity.pathIsReachable ? .offline : connectivity.failedOffline ? .probing : .online
        if case .scope(let scope) = filter { isStopped = machine.lineIsStopped(scope) }
    }
}
