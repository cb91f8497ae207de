import Dispatch
import Foundation

extension SchedulingMachine.Actions {
    /// Hands a group's slot to its task's engine; a task whose engine is gone gives it back, to the
    /// next waiting task.
    static func grant(_ task: AnyAPITask) {
        var next: AnyAPITask? = task
        while let task = next {
            if let engine = task.engine {
                engine.transition { $0.groupSlotGranted(task) }
                return
            }
            next = task.bag.concurrencyGroup?.release()
        }
    }

    /// Cancels what is to be cancelled, tells the async callers and feeds the tasks' own streams, in
    /// that order: what an engine does with a transition's actions before anything else, and all
    /// it does with a released engine's.
    func performCancellationsAndObservations() {
        for cancellable in cancellations { cancellable.cancel() }
        for (task, observation) in observations {
            switch observation {
            case .cached(let built): built.handOver(.observerCachedCopy)
            case .ended(.success(let built), let source): built.handOver(.observerEnded(source))
            case .ended(.failure(let error), _): task.observerFailed(error)
            }
        }
        if !timersAndGrants.isEmpty {
            for case .feedStreams(let task, let feed) in timersAndGrants { task.bag.feed(feed) }
        }
    }
}

/// The wait for a retry of a task that shares its requests (``APIConcurrencyPolicy/Sharing``): cancelling it
/// also takes the task off the resting flight it was to retry.
private struct RetryWait: APICancellable {
    let timer: any APICancellable
    weak var engine: APIEngine?
    /// The task's identifier: the task itself keeps this handle while it waits.
    let task: UInt64

    func cancel() {
        timer.cancel()
        engine?.retrierLeft(task, retries: false)
    }
}

extension APIEngine {
    // MARK: Actions (performed without the lock)

    /// Performs what a transition of the machine decided: cancellations, observers, timers, attempt
    /// starts, and the delivery of queued events (`delivery`, when they are to be scheduled); the
    /// reports to the event monitor of `attempt` (a failure before sending first, as it happened
    /// before the rest; circuit changes and refused retries last), and the shared flight a retry
    /// rests (before the retry's timer is set).
    func perform(
        _ actions: SchedulingMachine.Actions, delivery run: DeliveryRun?, reportingTo attempt: Attempt? = nil
    ) {
        if let attempt, !actions.timersAndGrants.isEmpty {
            for case .report(let report) in actions.timersAndGrants {
                if case .failedUnsent = report { tell(report, about: attempt) }
            }
        }
        actions.performCancellationsAndObservations()
        for action in actions.timersAndGrants {
            switch action {
            // Timers hold the task weakly: a clock may keep a cancelled timer's closure until its
            // due time, and the engine keeps every task in flight itself.
            case .scheduleDeadline(let task, let deadline):
                let timer = clock.schedule(after: deadline) { [weak self, weak task] in
                    if let task { self?.deadlineFired(task, deadline: deadline) }
                }
                transition { $0.deadlineTimerSet(task, timer: timer) }
            case .scheduleWaitLimit(let task, let maxWait):
                let timer = clock.schedule(after: maxWait) { [weak self, weak task] in
                    if let task { self?.waitLimitFired(task, maxWait: maxWait) }
                }
                transition { $0.waitTimerSet(task, timer: timer) }
            case .scheduleQuietEnd(let task, let interval):
                let timer = clock.schedule(after: interval) { [weak self, weak task] in
                    if let task { self?.quietEnded(task) }
                }
                transition { $0.waitTimerSet(task, timer: timer) }
            case .scheduleRetry(let task, let attempt, let delay):
                let timer = clock.schedule(after: delay) { [weak self, weak task] in
                    if let task { self?.retryTimerFired(task, attempt: attempt) }
                }
                // A shared attempt's retrier leaves its resting flight when its wait is cancelled.
                let handle =
                    task.bag.sharing == .never ? timer : RetryWait(timer: timer, engine: self, task: task.identifier)
                transition { $0.retryTimerSet(task, attempt: attempt, timer: handle) }
            case .scheduleThrottleTurn(let scope, let delay):
                _ = clock.schedule(after: delay) { [weak self] in self?.throttleTurnCame(for: scope) }
            case .scheduleProbe(let delay):
                _ = clock.schedule(after: delay) { [weak self] in self?.transition { $0.probeFired() } }
            case .restFlight(let task):
                if let key = attempt?.machine.flightKey { _ = sharedFlights.retrying(key, task: task.identifier) }
            case .settleDurable(let task, let settlement):
                task.bag.durableSlot?.decide(settlement, engine: self)
            case .grantSlot, .report, .start, .send, .replay, .cancel, .tell, .feedStreams:
                break  // slots and reports are handled last, below; the others are not timers
            }
        }
        let starts = actions.starts
        if !starts.isEmpty {
            if case .inline = execution {
                var inline = InlineList<StartTrampoline.Start>()
                for (task, attempt) in starts { inline.append((self, task, attempt)) }
                StartTrampoline.perform(inline)
            } else {
                // `send(_:)` returns once the policy is decided: the request is built over there.
                for (task, attempt) in starts {
                    // A task cancelled while its start waited in the queue is not even built (`performStart` checks).
                    execution.queue(forTask: task.identifier)?.async { self.performStart(task, attempt: attempt) }
                }
            }
        }
        switch run?.delivery {
        // Weakly: a pending delivery must not keep a released manager's engine (and its tasks) alive.
        case .queue(let queue)?:
            queue.async { [weak self] in self?.deliverEvents() }
            if run?.setsWatch == true { watchDelivery(on: queue) }
        case .inline?: deliverEvents()
        case nil: break
        }
        // Freed group slots go on last, so that with `.inline` delivery the terminal event of the
        // task that freed one comes before the start of the task (of any engine) that takes it.
        if !actions.timersAndGrants.isEmpty {
            for task in actions.grants { SchedulingMachine.Actions.grant(task) }
            for case .report(let report) in actions.timersAndGrants {
                if case .failedUnsent = report {} else if let attempt { tell(report, about: attempt) }
            }
        }
    }

    /// Delivers queued events until none are left. Only one thread delivers at a time.
    /// The outbox's buffers are reused (see ``EventOutbox``).
    private func deliverEvents() {
        var batch: EventOutbox.Batch = []
        let observed = !observers.isEmpty
        while state.withLock({ $0.machine.takeEvents(into: &batch) }) {
            for (task, event) in batch {
                task.deliver(event)
                if observed { tellObservers(delivered: event, of: task) }
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
