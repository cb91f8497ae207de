import Dispatch
import Foundation

extension SchedulingMachine.Actions {
    /// Cancels what is to be cancelled and tells the async callers, in that order.
    func performCancellationsAndObservations() {
        for cancellable in cancellations { cancellable.cancel() }
        for (task, observation) in observations {
            switch observation {
            case .cached(let built): built.handOver(.observerCachedCopy)
            case .ended(.success(let built), let source): built.handOver(.observerEnded(source))
            case .ended(.failure(let error), _): task.observerFailed(error)
            }
        }
    }
}

extension APIEngine {
    // MARK: Actions (performed without the lock)

    /// Performs what a transition of the machine decided: cancellations, observers, timers, attempt
    /// starts, and the delivery of queued events (`delivery`, when they are to be scheduled).
    func perform(_ actions: SchedulingMachine.Actions, delivery: APIDelivery?) {
        actions.performCancellationsAndObservations()
        for (task, deadline) in actions.deadlines {
            // Timers hold the task weakly: a clock may keep a cancelled timer's closure until its due
            // time, and the engine keeps every task in flight itself.
            let timer = clock.schedule(after: deadline) { [weak self, weak task] in
                if let task { self?.deadlineFired(task, deadline: deadline) }
            }
            keep(timer, in: task, as: \.deadlineTimer) { $0.needsDeadlineTimer(task) }
        }
        for (task, attempt, delay) in actions.retries {
            let timer = clock.schedule(after: delay) { [weak self, weak task] in
                if let task { self?.retryTimerFired(task, attempt: attempt) }
            }
            keep(timer, in: task, as: \.retryTimer) { $0.needsRetryTimer(task, attempt: attempt) }
        }
        if !actions.starts.isEmpty {
            if case .inline = execution {
                var starts = InlineList<StartTrampoline.Start>()
                for (task, attempt) in actions.starts { starts.append((self, task, attempt)) }
                StartTrampoline.perform(starts)
            } else {
                // `send(_:)` returns once the policy is decided: the request is built over there.
                for (task, attempt) in actions.starts {
                    execution.queue(forTask: task.identifier)?.async {
                        // A task cancelled while its start waited in the queue is not even built.
                        guard self.isCurrent(task, attempt: attempt) else { return }
                        self.performStart(task, attempt: attempt)
                    }
                }
            }
        }
        switch delivery {
        // Weakly: a pending delivery must not keep a released manager's engine (and its tasks) alive.
        case .queue(let queue)?: queue.async { [weak self] in self?.deliverEvents() }
        case .immediate?: deliverEvents()
        case nil: break
        }
    }

    /// Keeps a timer on the task if the machine still needs it, else cancels it.
    private func keep(
        _ timer: any APICancellable, in task: AnyAPITask,
        as keyPath: ReferenceWritableKeyPath<AnyAPITask, (any APICancellable)?>,
        if stillNeeded: (SchedulingMachine) -> Bool
    ) {
        let kept = lock.withLock { () -> Bool in
            guard stillNeeded(machine) else { return false }
            task[keyPath: keyPath] = timer
            return true
        }
        if !kept { timer.cancel() }
    }

    /// Delivers queued events until none are left. Only one thread delivers at a time.
    ///
    /// The machine's outbox and the batch being delivered trade places, and the emptied batch is
    /// kept as a spare, so a steady flow of events reuses two buffers instead of allocating one per
    /// batch.
    private func deliverEvents() {
        var batch: [(AnyAPITask, AnyAPITask.Event)] = []
        while lock.withLock({ machine.takeEvents(into: &batch) }) {
            for (task, event) in batch {
                task.deliver(event)
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
