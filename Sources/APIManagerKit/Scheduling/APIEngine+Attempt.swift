import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The attempt's driver: it runs the stages (``Attempt/Stage``, in `APIEngine+Stages.swift`) one
/// after another, and turns what each says (``Attempt/Outcome``) into the next stage or into one
/// event of the scheduling machine. Stages never take the engine's lock and never call the driver;
/// an async stage's end comes back here through ``resume(_:after:with:hop:)``. It runs where
/// ``APIEngine/execution`` says.
extension APIEngine {
    /// Builds the attempt's request and runs its stages; called to start an attempt, and again when
    /// it starts over (a changed credential, a replay). Nothing is built for an attempt that is no
    /// longer current. Called without the lock.
    func performStart(_ task: AnyAPITask, attempt number: Int, isReplay: Bool = false) {
        // One locked read: whether to go on, and the settings the attempt keeps.
        let (current, monitor, secretNames) = settingsIfCurrent(task, attempt: number)
        guard current else { return }
        switch BuildRequestStage.run(
            task, persistedHeaders: persistedHeaders, defaultHeaders: defaultHeaders, cookies: cookies,
            now: clock.date)
        {
        case .success(let built):
            let attempt = Attempt(
                engine: self, task: task, number: number, isReplay: isReplay, request: built.request,
                sensitiveHeaders: built.sensitiveHeaders, monitor: monitor)
            // The secret names join the credential headers before the link rule, the cache lookup and
            // the transport see them.
            if !secretNames.isEmpty { attempt.sensitiveHeaders.formUnion(secretNames) }
            advance(attempt, at: .authenticate, with: perform(.authenticate, of: attempt))
        case .failure(let error):
            fail(task, attempt: number, with: error, sent: false, monitor: monitor)
        }
    }

    /// Goes on with an attempt whose async stage ended. `hop` when it ended on a thread that is not
    /// the engine's (a refresh's): the attempt goes on on its work queue, if it is still current.
    func resume(_ attempt: Attempt, after stage: Attempt.Stage, with outcome: Attempt.Outcome, hop: Bool) {
        guard hop else {
            advance(attempt, at: stage, with: outcome)
            return
        }
        onExecution(of: attempt.task) { [weak self] in
            guard let self, self.isCurrent(attempt.task, attempt: attempt.number) else { return }
            self.advance(attempt, at: stage, with: outcome)
        }
    }

    /// Runs `stage` of an attempt handed over from another thread (the transport's answer) where
    /// ``execution`` says.
    func run(_ attempt: Attempt, from stage: Attempt.Stage) {
        if let queue = execution.queue(forTask: attempt.task.identifier) {
            queue.async { self.advance(attempt, at: stage, with: self.perform(stage, of: attempt)) }
        } else {
            advance(attempt, at: stage, with: perform(stage, of: attempt))  // no closure to allocate
        }
    }

    /// One `switch` per outcome: the next stage, or one event of the machine.
    private func advance(_ attempt: Attempt, at stage: Attempt.Stage, with outcome: Attempt.Outcome) {
        var stage = stage
        var outcome = outcome
        while true {
            let next: Attempt.Stage
            switch consume outcome {
            case .next:
                guard let following = stage.following else { return }
                next = following
            case .waiting(let work):
                if let work {
                    transition { $0.asyncStepStarted(work, for: attempt.task, attempt: attempt.number, into: &$1) }
                }
                return
            case .readyToSend(let copy):
                let task = attempt.task
                let number = attempt.number
                let actions = transition { machine, actions in
                    if let copy {
                        machine.cachedResponse(task, attempt: number, response: copy, terminal: false, into: &actions)
                    }
                    machine.requestBuilt(task, attempt: number, into: &actions)
                }
                // A task that ended while its request was being built is never handed to the transport.
                guard actions.sends(task, attempt: number) else { return }
                next = .send
            case .sent(let handle):
                transition { $0.attemptSent(attempt.task, attempt: attempt.number, handle: handle, into: &$1) }
                return
            case .refused:
                let task = attempt.task
                let number = attempt.number
                let actions = transition { $0.credentialRefused(task, attempt: number, into: &$1) }
                next = actions.replays(task, attempt: number) ? .renew : .respond
            case .answered(let response, let source):
                transition {
                    $0.attemptEnded(
                        attempt.task, attempt: attempt.number, outcome: .success(response), source: source,
                        retryDelay: nil, into: &$1)
                }
                return
            case .failed(let error):
                fail(
                    attempt.task, attempt: attempt.number, with: error, sent: attempt.sent != nil,
                    monitor: attempt.monitor)
                return
            case .retry(let delay, let error):
                let retryDelay = delay.isFinite ? max(0, delay) : nil
                transition {
                    $0.attemptEnded(
                        attempt.task, attempt: attempt.number, outcome: .failure(error), source: .network,
                        retryDelay: retryDelay, into: &$1)
                }
                return
            case .startOver(let isReplay):
                performStart(attempt.task, attempt: attempt.number, isReplay: isReplay)
                return
            case .dropped:
                return
            }
            stage = next
            outcome = perform(next, of: attempt)
        }
    }

    /// The attempt failed: the manager's retry hook decides whether it is retried. A failure before
    /// anything was sent is told to the event monitor here (a sent attempt's answer was told when
    /// it came).
    private func fail(
        _ task: AnyAPITask, attempt: Int, with error: APIError, sent: Bool, monitor: (@Sendable (APIEvent) -> Void)?
    ) {
        if !sent, let monitor {
            monitor(
                APIEvent(
                    kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                    duration: nil, sensitiveHeaders: []))
        }
        // The hook runs only for the current attempt: a late answer never runs the manager's hooks.
        var retryDelay: TimeInterval?
        if Self.mayRetry(error), isCurrent(task, attempt: attempt),
            let delay = task.retryDelay(afterAttempt: attempt, error: error), delay.isFinite
        {
            retryDelay = max(0, delay)
        }
        transition {
            $0.attemptEnded(
                task, attempt: attempt, outcome: .failure(error), source: .network, retryDelay: retryDelay, into: &$1)
        }
    }

    /// Runs a task's `work` where ``execution`` says: at once for `.inline`, else on its work queue.
    func onExecution(of task: AnyAPITask, _ work: @escaping @Sendable () -> Void) {
        if let queue = execution.queue(forTask: task.identifier) {
            queue.async(execute: work)
        } else {
            work()
        }
    }

    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        state.withLock { $0.machine.isCurrent(task, attempt: attempt) }
    }
}
