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
            defersForms: acceptsBodyWriters, now: clock.date)
        {
        case .success(let built):
            let attempt = Attempt(
                engine: self, task: task, number: number, isReplay: isReplay, request: built.request,
                sensitiveHeaders: built.sensitiveHeaders, monitor: monitor)
            // The secret names join the credential headers before the link rule, the cache lookup and
            // the transport see them.
            if !secretNames.isEmpty { attempt.sensitiveHeaders.formUnion(secretNames) }
            if let stream = built.request.httpBodyStream { attempt.bodyFile = BodyFile.claim(stream) }
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
                let origin = resilienceOrigin(of: attempt)
                let now = origin == nil ? 0 : clock.now
                let (actions, admission) = transitionState { state, actions -> Resilience.Admission in
                    if let copy {
                        state.machine.cachedResponse(
                            task, attempt: number, response: copy, terminal: false, into: &actions)
                    }
                    if let origin {
                        let admission = state.resilience.admit(
                            origin: origin, task: task.identifier, isFirstAttempt: number == 1 && !attempt.isReplay,
                            now: now)
                        if case .refused = admission { return admission }
                    }
                    state.machine.requestBuilt(task, attempt: number, into: &actions)
                    if let origin, !actions.sends(task, attempt: number) {
                        // Ended while its request was built: admitted, never sent, no answer to come.
                        state.resilience.abandon(origin: origin, task: task.identifier, now: now)
                    }
                    return .admitted
                }
                if case .refused(let closesIn) = admission, let origin {
                    // The circuit is open: nothing is sent.
                    outcome = .failed(.circuitOpen(origin: origin, closesIn: closesIn))
                    continue
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
                let origin = attempt.sent == nil ? nil : resilienceOrigin(of: attempt)
                let now = origin == nil ? 0 : clock.now
                let shared = attempt.sharedAnswer
                let change = transitionState { state, actions -> Resilience.Change? in
                    let change = origin.flatMap { origin -> Resilience.Change? in
                        guard shared?.claimRecord() ?? true else { return nil }
                        return state.resilience.record(
                            origin: origin, task: attempt.task.identifier, transientFailure: false, now: now)
                    }
                    state.machine.attemptEnded(
                        attempt.task, attempt: attempt.number, outcome: .success(response), source: source,
                        retryDelay: nil, into: &actions)
                    return change
                }.value
                report(change, origin: origin, of: attempt)
                return
            case .failed(let error):
                fail(attempt, with: error)
                return
            case .retry(let delay, let error):
                fail(attempt, with: error, requestedRetry: delay)
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

    /// The attempt failed: the manager's retry hook (or an inspector's `requestedRetry`) decides
    /// whether it is retried, within the engine's retry budget. A failure before anything was sent is
    /// told to the event monitor here (a sent attempt's answer was told when it came).
    private func fail(_ attempt: Attempt, with error: APIError, requestedRetry: TimeInterval? = nil) {
        fail(
            attempt.task, attempt: attempt.number, with: error, sent: attempt.sent != nil, monitor: attempt.monitor,
            origin: resilienceOrigin(of: attempt), request: attempt.request, sensitiveHeaders: attempt.sensitiveHeaders,
            requestedRetry: requestedRetry, flightKey: attempt.flightKey, mayRetry: attempt.mayRetry,
            sharedAnswer: attempt.sharedAnswer)
    }

    private func fail(
        _ task: AnyAPITask, attempt: Int, with error: APIError, sent: Bool, monitor: (@Sendable (APIEvent) -> Void)?,
        origin: String? = nil, request: URLRequest? = nil, sensitiveHeaders: Set<String> = [],
        requestedRetry: TimeInterval? = nil, flightKey: SharedFlights.Key? = nil, mayRetry: Bool = true,
        sharedAnswer: SharedAnswer? = nil
    ) {
        if !sent, let monitor {
            monitor(
                APIEvent(
                    kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                    duration: nil, sensitiveHeaders: []))
        }
        var retryDelay: TimeInterval?
        if !mayRetry {
            retryDelay = nil
        } else if let requestedRetry {
            retryDelay = requestedRetry.isFinite ? max(0, requestedRetry) : nil
        } else if Self.mayRetry(error), isCurrent(task, attempt: attempt),
            let delay = task.retryDelay(afterAttempt: attempt, error: error), delay.isFinite
        {
            // The hook runs only for the current attempt: a late answer never runs the manager's hooks.
            retryDelay = max(0, delay)
        }
        // A shared attempt's retry rests its flight before the retry's timer can fire (see ``SharedFlights``).
        let rests = retryDelay != nil && flightKey.map { sharedFlights.retrying($0, task: task.identifier) } == true
        let now = origin == nil ? 0 : clock.now
        let (actions, (change, refused)) = transitionState { state, actions -> (Resilience.Change?, Bool) in
            var change: Resilience.Change?
            var refused = false
            if let origin {
                if sent, Resilience.isAbandoned(error) {
                    state.resilience.abandon(origin: origin, task: task.identifier, now: now)
                } else if sent, sharedAnswer?.claimRecord() ?? true {
                    // A shared answer is one network attempt: recorded once, whoever got it first.
                    change = state.resilience.record(
                        origin: origin, task: task.identifier, transientFailure: Resilience.isTransient(error), now: now
                    )
                }
                if retryDelay != nil {
                    let allowed =
                        sharedAnswer.map { shared in
                            shared.retryAllowed { state.resilience.allowsRetry(origin: origin, now: now) }
                        } ?? state.resilience.allowsRetry(origin: origin, now: now)
                    if !allowed {
                        retryDelay = nil
                        refused = true
                    }
                }
            }
            state.machine.attemptEnded(
                task, attempt: attempt, outcome: .failure(error), source: .network, retryDelay: retryDelay,
                into: &actions)
            return (change, refused)
        }
        if rests, !actions.schedulesRetry(of: task) { retrierLeft(task, retries: false) }
        guard let monitor, let origin else { return }
        let event = { (kind: APIEvent.Kind) in
            monitor(
                APIEvent(
                    kind: kind, taskIdentifier: task.identifier, attempt: attempt, request: request, duration: nil,
                    sensitiveHeaders: sensitiveHeaders))
        }
        switch change {
        case .opened(let closesIn)?: event(.circuitOpened(origin: origin, closesIn: closesIn))
        case .closed?: event(.circuitClosed(origin: origin))
        case nil: break
        }
        if refused { event(.retryRefused(error)) }
    }

    /// Tells the event monitor that an attempt's outcome opened or closed its origin's circuit.
    private func report(_ change: Resilience.Change?, origin: String?, of attempt: Attempt) {
        guard let change, let origin, let monitor = attempt.monitor else { return }
        let kind: APIEvent.Kind =
            switch change {
            case .opened(let closesIn): .circuitOpened(origin: origin, closesIn: closesIn)
            case .closed: .circuitClosed(origin: origin)
            }
        monitor(
            APIEvent(
                kind: kind, taskIdentifier: attempt.task.identifier, attempt: attempt.number, request: attempt.request,
                duration: nil, sensitiveHeaders: attempt.sensitiveHeaders))
    }

    /// The origin key of the attempt's request when the engine has a circuit breaker or a retry
    /// budget; `nil` otherwise, so that engines without them do no work for them.
    private func resilienceOrigin(of attempt: Attempt) -> String? {
        guard circuitBreaker != nil || retryBudget != nil else { return nil }
        return Resilience.origin(of: attempt.request.url)
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
        if task.sharing != .never { retrierLeft(task.identifier, retries: retries) }
    }

    func retrierLeft(_ task: UInt64, retries: Bool) {
        if let launch = sharedFlights.retrierLeft(task, retries: retries) { self.launch(launch) }
    }

    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        state.withLock { $0.machine.isCurrent(task, attempt: attempt) }
    }
}
