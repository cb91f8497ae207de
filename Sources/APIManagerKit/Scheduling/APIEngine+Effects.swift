import Dispatch
import Foundation

extension APIEngine {
    // MARK: Effects (performed without the lock)

    /// What a transition decided to do once the lock is released.
    struct Effects {
        var cancellations: [any APICancellable] = []
        var observations: [(AnyAPITask, AnyAPITask.Observation)] = []
        var starts = StartTrampoline.Starts()
        var retries: [(AnyAPITask, Int, TimeInterval)] = []
        var deadlines: [(AnyAPITask, TimeInterval)] = []
        var delivery: APIDelivery?

        func performCancellationsAndCompletions() {
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

    func perform(_ effects: Effects) {
        effects.performCancellationsAndCompletions()
        for (task, deadline) in effects.deadlines {
            // Timers hold the task weakly: a clock may keep a cancelled timer's closure until its due
            // time, and the engine keeps every task in flight itself.
            let timer = clock.schedule(after: deadline) { [weak self, weak task] in
                if let task { self?.deadlineFired(task, deadline: deadline) }
            }
            store(timer, in: task, as: \.deadlineTimer) { $0.phase != .ended }
        }
        for (task, attempt, delay) in effects.retries {
            let timer = clock.schedule(after: delay) { [weak self, weak task] in
                if let task { self?.retryTimerFired(task, attempt: attempt) }
            }
            store(timer, in: task, as: \.retryTimer) { $0.phase == .waitingForRetry && $0.attemptNumber == attempt }
        }
        if !effects.starts.isEmpty {
            switch execution {
            case .inline:
                StartTrampoline.perform(effects.starts)
            case .queue(let queue):
                // `send(_:)` returns once the policy is decided: the request is built over there.
                for start in effects.starts {
                    queue.async {
                        // A task cancelled while its start waited in the queue is not even built.
                        guard start.engine.isCurrent(start.task, attempt: start.attempt) else { return }
                        start.engine.performStart(start.task, attempt: start.attempt)
                    }
                }
            }
        }
        switch effects.delivery {
        // Weakly: a pending delivery must not keep a released manager's engine (and its tasks) alive.
        case .queue(let queue)?: queue.async { [weak self] in self?.deliverEvents() }
        case .immediate?: deliverEvents()
        case nil: break
        }
    }

    /// Keeps a timer on the task if it is still needed, else cancels it.
    private func store(
        _ timer: any APICancellable, in task: AnyAPITask,
        as keyPath: ReferenceWritableKeyPath<AnyAPITask, (any APICancellable)?>,
        if stillNeeded: (AnyAPITask) -> Bool
    ) {
        lock.lock()
        if stillNeeded(task) {
            task[keyPath: keyPath] = timer
            lock.unlock()
        } else {
            lock.unlock()
            timer.cancel()
        }
    }

    /// Delivers queued events until none are left. Only one thread delivers at a time.
    ///
    /// The outbox and the batch being delivered trade places, and the emptied batch is kept as
    /// `spareOutbox`, so a steady flow of events reuses two buffers instead of allocating one per
    /// batch.
    private func deliverEvents() {
        var batch: [(AnyAPITask, AnyAPITask.Event)] = []
        while true {
            lock.lock()
            if outbox.isEmpty {
                isDeliveryScheduled = false
                if spareOutbox.capacity < batch.capacity { swap(&spareOutbox, &batch) }
                lock.unlock()
                return
            }
            if batch.capacity == 0 { swap(&batch, &spareOutbox) }
            swap(&batch, &outbox)
            lock.unlock()
            for (task, event) in batch {
                task.deliver(event)
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
