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
        // One take of the lock: whether to go on, the machine keeping the attempt's link to end it
        // by, and the settings the attempt keeps.
        let link = LockedAttemptLink()
        let (counted, observers, secretNames) = startAttempt(task, attempt: number, link: link)
        guard let counted else { return }
        let attempt = Attempt(
            engine: self, task: task, number: number, countedNumber: counted, isReplay: isReplay, link: link,
            observers: observers)
        if !observers.isEmpty {
            attempt.machine.startedAt = clock.now
            tellObservers(.started(attempt: number), of: attempt, at: attempt.machine.startedAt)
        }
        switch BuildRequestStage.run(
            task, baseURL: settings.baseURL, persistedHeaders: settings.persistedHeaders,
            defaultHeaders: settings.defaultHeaders, defaultHeadersRefusal: defaultHeadersRefusal,
            cookies: cookies,
            defersForms: acceptsBodyWriters, now: clock.date)
        {
        case .success(let built):
            // The secret names join the credential headers before the link rule, the cache lookup and
            // the transport see them.
            var sensitiveHeaders = built.sensitiveHeaders
            if !secretNames.isEmpty { sensitiveHeaders.formUnion(secretNames) }
            attempt.machine.built(
                built.request, sensitiveHeaders: sensitiveHeaders, hasUncheckedHeaders: built.hasUncheckedHeaders,
                bodyFile: built.request.httpBodyStream.flatMap { BodyFile.claim($0) })
            advance(attempt, at: .authenticate, with: perform(.authenticate, of: attempt))
        case .failure(let error):
            fail(attempt, with: error)
        }
    }

    /// Goes on with an attempt whose async stage ended. `hop` when it ended on a thread that is not
    /// the engine's (a refresh's): the attempt goes on on its work queue, unless it is over.
    func resume(_ attempt: Attempt, after stage: Attempt.Stage, with outcome: Attempt.Outcome, hop: Bool) {
        guard hop else {
            advance(attempt, at: stage, with: outcome)
            return
        }
        onExecution(of: attempt.task) { [weak self] in
            guard let self, !attempt.isOver else { return }
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
                if let work { attempt.wait(on: work) }
                return
            case .readyToSend(let copy):
                // The machine delivers a stored copy first, then admits the attempt (its origin's
                // circuit) and says whether it may go; a refused one ended its task.
                let task = attempt.task
                let number = attempt.number
                let network = networkContext(of: attempt)
                let actions = transition(reportingTo: attempt) {
                    $0.requestBuilt(
                        task, attempt: number, isReplay: attempt.isReplay, cachedCopy: copy, network: network,
                        isMonitored: isReported(attempt))
                }
                // A task that ended while its request was being built is never handed to the transport.
                guard actions.sends(task, attempt: number) else {
                    attempt.machine.end()
                    return
                }
                next = .send
            case .sent(let handle):
                attempt.sent(handle)
                return
            case .refused:
                let task = attempt.task
                let number = attempt.number
                let actions = transition { $0.credentialRefused(task, attempt: number) }
                next = actions.replays(task, attempt: number) ? .renew : .respond
            case .answered(let response, let source):
                attempt.machine.end()
                let end = SchedulingMachine.AttemptEnd(
                    sent: attempt.machine.wasSent, sharedAnswer: attempt.machine.sharedAnswer,
                    isMonitored: isReported(attempt),
                    network: !attempt.machine.wasSent ? nil : networkContext(of: attempt))
                transition(reportingTo: attempt) {
                    $0.attemptEnded(
                        attempt.task, attempt: attempt.number, outcome: .success(response), source: source,
                        retryDelay: nil, end: end)
                }
                return
            case .failed(let error):
                fail(attempt, with: error)
                return
            case .retry(let delay, let error):
                fail(attempt, with: error, requestedRetry: delay)
                return
            case .startOver(let isReplay):
                attempt.machine.end()
                performStart(attempt.task, attempt: attempt.number, isReplay: isReplay)
                return
            case .dropped:
                attempt.machine.end()
                return
            }
            stage = next
            outcome = perform(next, of: attempt)
        }
    }

    /// The attempt failed: the manager's retry hook (or an inspector's `requestedRetry`) decides
    /// whether it is retried; the machine then applies the engine's retry budget and records the
    /// outcome for the origin's circuit (see `SchedulingMachine+Resilience.swift`).
    private func fail(_ attempt: Attempt, with error: APIError, requestedRetry: TimeInterval? = nil) {
        attempt.machine.end()
        let task = attempt.task
        let number = attempt.number
        // A task that waits for the network waits after an offline failure: no retry is spent.
        if task.bag.connectivityWait != nil, Self.isOfflineError(error) {
            transition(reportingTo: attempt) { $0.attemptFoundOffline(task, attempt: number, error: error) }
            return
        }
        var retryDelay: TimeInterval?
        if !attempt.machine.mayRetry {
            retryDelay = nil
        } else if let requestedRetry {
            retryDelay = requestedRetry.isFinite ? max(0, requestedRetry) : nil
        } else if Self.mayRetry(error), !attempt.isOver,
            let delay = task.retryDelay(afterAttempt: attempt.countedNumber, error: error), delay.isFinite
        {
            // The hook runs only for an attempt that is not over: a late answer never runs the
            // manager's hooks.
            retryDelay = max(0, delay)
        }
        let end = SchedulingMachine.AttemptEnd(
            sent: attempt.machine.wasSent, sharedAnswer: attempt.machine.sharedAnswer,
            boardedFlight: attempt.machine.flightKey != nil,
            isMonitored: isReported(attempt), network: networkContext(of: attempt))
        transition(reportingTo: attempt) {
            $0.attemptEnded(
                task, attempt: number, outcome: .failure(error), source: .network, retryDelay: retryDelay, end: end)
        }
    }

    /// What the machine's resilience rules need of the attempt when the engine has a circuit
    /// breaker or a retry budget: its origin and the clock; `nil` otherwise, so that engines
    /// without them do no work for them, and for an attempt whose request was never built.
    private func networkContext(of attempt: Attempt) -> SchedulingMachine.NetworkContext? {
        guard hasResilience, attempt.machine.phase != .unbuilt else { return nil }
        return SchedulingMachine.NetworkContext(
            origin: Resilience.origin(of: attempt.machine.request.url), now: clock.now)
    }

    /// Runs a task's `work` where ``execution`` says: at once for `.inline`, else on its work queue.
    func onExecution(of task: AnyAPITask, _ work: @escaping @Sendable () -> Void) {
        if let queue = execution.queue(forTask: task.identifier) {
            queue.async(execute: work)
        } else {
            work()
        }
    }

    /// A task whose shared attempt failed no longer waits to retry it: it retries now, or it ended
    /// during the delay (see ``SharedFlights/retrierLeft(_:retries:)``).
    func retrierLeft(_ task: AnyAPITask, retries: Bool) {
        if task.bag.sharing != .never { retrierLeft(task.identifier, retries: retries) }
    }

    func retrierLeft(_ task: UInt64, retries: Bool) {
        if let launch = sharedFlights.retrierLeft(task, retries: retries) { self.launch(launch) }
    }
}
