import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An attempt, stage by stage: build the request → cache lookup → transport → build the typed
/// response (and the cache store) → the transition that retries or ends the task. Each stage lives in
/// `Stages/` and says in its result what it did; only this driver takes the engine's lock, between
/// stages, never inside one. It runs where ``APIEngine/execution`` says.
extension APIEngine {
    /// Runs an attempt's stages up to the transport. Called without the lock.
    ///
    /// Build the request → the credential (waiting for a refresh that runs) → the interceptors →
    /// check → cache lookup → transport. Without an authentication and interceptors, the middle
    /// steps are skipped without a look at them.
    func performStart(_ task: AnyAPITask, attempt: Int, isReplay: Bool = false) {
        switch BuildRequestStage.run(
            task, persistedHeaders: persistedHeaders, defaultHeaders: defaultHeaders, cookies: cookies,
            now: clock.date)
        {
        case .success(let built):
            let step = AttemptStep(task: task, number: attempt, isReplay: isReplay)
            if authentication == nil && adapters.isEmpty && inspectors.isEmpty {
                send(built, grant: nil, step)
            } else {
                authenticate(built, step)
            }
        case .failure(let error):
            failBeforeSending(task, attempt: attempt, error: error)
        }
    }

    /// An attempt on its way through the stages.
    struct AttemptStep: Sendable {
        let task: AnyAPITask
        let number: Int
        let isReplay: Bool

        var context: APIAttempt { APIAttempt(task: task, number: number, isReplay: isReplay) }
    }

    private func failBeforeSending(_ task: AnyAPITask, attempt: Int, error: APIError) {
        eventMonitor?(
            APIEvent(
                kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                duration: nil, sensitiveHeaders: []))
        attemptCompleted(task, attempt: attempt, result: .failure(error), cache: nil)
    }

    /// Puts the authentication's credential on the request, once no refresh runs.
    private func authenticate(_ built: BuildRequestStage.Built, _ step: AttemptStep) {
        guard let authentication else {
            adapt(built, grant: nil, step)
            return
        }
        // The refresh may end on another engine's thread: the attempt goes on on this engine's.
        let access = authentication.access { [weak self] result in
            self?.onExecution(of: step.task) { [weak self] in
                guard let self, self.isCurrent(step.task, attempt: step.number) else { return }
                self.granted(result, built, step)
            }
        }
        switch access {
        case .now(let result): granted(result, built, step)
        case .waiting(let wait): track(wait, step)
        }
    }

    private func granted(
        _ result: Result<APIAuthentication.Grant, APIError>, _ built: BuildRequestStage.Built, _ step: AttemptStep
    ) {
        switch result {
        case .failure(let error):
            failBeforeSending(step.task, attempt: step.number, error: error)
        case .success(let grant):
            var built = built
            if let credential = grant.credential, let authenticator = authentication?.authenticator {
                let before = built.request.allHTTPHeaderFields ?? [:]
                authenticator.apply(credential, to: &built.request)
                // Whatever the authenticator set is a credential: redacted, and dropped on a
                // redirect to another origin.
                for (name, value) in built.request.allHTTPHeaderFields ?? [:] where before[name] != value {
                    built.sensitiveHeaders.insert(name)
                }
            }
            adapt(built, grant: grant, step)
        }
    }

    /// Passes the request through the adapters, in order, sends it, and passes the response through
    /// the inspectors: one Swift task per attempt, to which the transport's answer comes back when
    /// there are inspectors.
    private func adapt(_ built: BuildRequestStage.Built, grant: APIAuthentication.Grant?, _ step: AttemptStep) {
        let adapters = self.adapters
        let inspectors = self.inspectors
        guard !adapters.isEmpty || !inspectors.isEmpty else {
            send(built, grant: grant, step)
            return
        }
        // The engine is held weakly while user code runs, so that a manager released meanwhile
        // ends its tasks (and cancels this Swift task) instead of waiting for the interceptor.
        let work = asyncWork.start { [weak self] in
            var adapted = built
            do {
                for adapter in adapters {
                    adapted.request = try await adapter.adapt(adapted.request, for: step.context)
                }
            } catch {
                self?.adaptFailed(error, step)
                return
            }
            // An attempt that is no longer current is not handed to the transport (`send` checks).
            guard !inspectors.isEmpty else {
                self?.send(adapted, grant: grant, step)
                return
            }
            let answer = await withUnsafeContinuation {
                [weak self] (continuation: UnsafeContinuation<Answer?, Never>) in
                // The transport calls back exactly once when it was handed the request.
                let handed =
                    self?.send(adapted, grant: grant, step) { sent, result in
                        continuation.resume(returning: Answer(sent: sent, result: result))
                    } ?? false
                if !handed { continuation.resume(returning: nil) }
            }
            // The inspectors see every response, a refusal the authentication will answer included.
            guard let answer, let raw = self?.received(answer.result, for: answer.sent, authenticates: false) else {
                return
            }
            let verdict = await Self.inspect(raw, answer.sent, inspectors)
            guard let self else { return }
            if case .proceed = verdict, self.takesOverRefusal(raw, answer.sent) { return }
            self.attemptInspected(raw, answer.sent, verdict)
        }
        if let work { track(work, step) }
    }

    /// What the transport answered an attempt whose interceptors wait for it.
    private struct Answer: Sendable {
        let sent: TransportStage.SentAttempt
        let result: Result<APIRawResponse, any Error>
    }

    /// Checks the request, looks it up in the cache, and hands it to the transport. Returns whether
    /// it was handed over: only then is `answered` (or, without it, the engine's own handler)
    /// called, once.
    @discardableResult
    private func send(
        _ built: BuildRequestStage.Built, grant: APIAuthentication.Grant?, _ step: AttemptStep,
        answered: (@Sendable (TransportStage.SentAttempt, Result<APIRawResponse, any Error>) -> Void)? = nil
    ) -> Bool {
        let task = step.task
        let attempt = step.number
        var built = built
        var grant = grant
        // One locked read for both settings; the secret names join the credential headers before
        // the link rule, the cache lookup and the transport see them.
        let (monitor, secretNames) = monitorAndSecretNames
        if !secretNames.isEmpty { built.sensitiveHeaders.formUnion(secretNames) }
        if let allowed = task.credentialOrigins, !allowed.contains(where: { $0 == Origin(built.request.url) }) {
            // A page on another origin: it goes without credentials, as after a redirect, and a
            // refusal of it is an ordinary response (no refresh).
            CredentialHeaders.remove(from: &built.request, marked: built.sensitiveHeaders)
            grant = nil
        }
        do {
            try BuildRequestStage.check(built.request)
        } catch {
            failBeforeSending(task, attempt: attempt, error: error)
            return false
        }
        // A refresh started (or the credential changed) while the interceptors ran: the request
        // does not go with the old credential, it starts over and gets the new one.
        if let grant, let authentication, !authentication.isCurrent(grant) {
            performStart(task, attempt: attempt, isReplay: step.isReplay)
            return false
        }
        var cacheContext: CacheContext?
        if let cache {
            let lookup = CacheLookupStage.lookUp(
                cache, settings: task.cacheSettings, attempt: attempt, request: built.request,
                sensitiveHeaders: built.sensitiveHeaders, writesBehind: writesBehind)
            switch lookup {
            case .answer(let stored, let otherwise):
                if deliverCached(stored, for: task, attempt: attempt, terminal: true) { return false }
                cache.remove(for: otherwise.key)  // no longer builds a response: the network answers
                cacheContext = otherwise
            case .copyFirst(let stored, var then):
                if !step.isReplay && !deliverCached(stored, for: task, attempt: attempt, terminal: false) {
                    cache.remove(for: then.key)
                    then.revalidating = nil
                }
                cacheContext = then
            case .network(let context):
                cacheContext = context
            }
            cacheContext?.addConditionalHeaders(to: &built.request)
        }
        // A task that ended while its request was being built is never handed to the transport.
        guard claimSend(task, attempt: attempt) else { return false }
        let sent = TransportStage.SentAttempt(
            task: task, number: attempt, request: built.request, startedAt: clock.now,
            options: APITransportOptions(
                sensitiveHeaders: built.sensitiveHeaders, maxResponseBodySize: task.maxResponseBodySize,
                cookies: cookies, cookieDate: cookies == nil ? nil : clock.date),
            monitor: monitor, cache: cacheContext, isReplay: step.isReplay,
            credentialGeneration: grant?.credential == nil ? nil : grant?.generation)
        monitor?(
            APIEvent(
                kind: .started, taskIdentifier: task.identifier, attempt: attempt, request: built.request,
                duration: nil, sensitiveHeaders: built.sensitiveHeaders))
        let handle: any APICancellable
        if let answered {
            handle = transport.send(built.request, options: sent.options) { result in answered(sent, result) }
        } else {
            handle = transport.send(built.request, options: sent.options) { [weak self] result in
                guard let self else { return }
                if let queue = self.execution.queue(forTask: sent.task.identifier) {
                    // Off the transport's callback queue: responses of different tasks build in parallel.
                    queue.async { self.transportAnswered(sent, result: result) }
                } else {
                    self.transportAnswered(sent, result: result)
                }
            }
        }
        transition { machine, actions in machine.attemptSent(task, attempt: attempt, handle: handle, into: &actions) }
        return true
    }

    /// What the transport answered, where ``execution`` says (no interceptor).
    private func transportAnswered(_ sent: TransportStage.SentAttempt, result: Result<APIRawResponse, any Error>) {
        guard let raw = received(result, for: sent) else { return }
        attemptCompleted(sent.task, attempt: sent.number, result: .success(raw), cache: sent.cache)
    }

    /// The transport's answer, told to the event monitor; a failure completes the attempt and,
    /// when `authenticates`, a refusal of the credential is taken over by the authentication (both
    /// `nil`). What is left is a response for the interceptors and the response stage.
    private func received(
        _ result: Result<APIRawResponse, any Error>, for sent: TransportStage.SentAttempt, authenticates: Bool = true
    ) -> APIRawResponse? {
        let result = TransportStage.answer(
            result, for: sent, persistedHeaders: persistedHeaders, cookies: cookies, now: clock.date)
        if let monitor = sent.monitor, isCurrent(sent.task, attempt: sent.number) {
            monitor(
                APIEvent(
                    kind: .finished(result), taskIdentifier: sent.task.identifier, attempt: sent.number,
                    request: sent.request, duration: clock.now - sent.startedAt,
                    sensitiveHeaders: sent.options.sensitiveHeaders))
        }
        switch result {
        case .failure:
            attemptCompleted(sent.task, attempt: sent.number, result: result, cache: sent.cache)
            return nil
        case .success(let raw):
            return authenticates && takesOverRefusal(raw, sent) ? nil : raw
        }
    }

    /// A response refusing the credential the attempt carried: the attempt is sent again with the
    /// renewed one (once per task), or fails with the refresh's failure. Returns whether it took
    /// the response over.
    private func takesOverRefusal(_ raw: APIRawResponse, _ sent: TransportStage.SentAttempt) -> Bool {
        guard let authentication, let generation = sent.credentialGeneration,
            authentication.authenticator.isRefused(raw, to: sent.request),
            transition({ machine, actions in machine.credentialRefused(sent.task, attempt: sent.number, into: &actions) })
                .contains(.replay(sent.task, attempt: sent.number))
        else { return false }
        let step = AttemptStep(task: sent.task, number: sent.number, isReplay: true)
        let refusal = authentication.refused(sent.request, sentWith: generation, work: asyncWork) {
            [weak self] result in
            self?.onExecution(of: step.task) { [weak self] in self?.replay(after: result, step) }
        }
        switch refusal {
        case nil: return false
        case .now(let result)?: replay(after: result, step)
        case .waiting(let wait)?: track(wait, step)
        }
        return true
    }

    private func replay(after result: Result<APIAuthentication.Grant, APIError>, _ step: AttemptStep) {
        guard isCurrent(step.task, attempt: step.number) else { return }
        switch result {
        case .success: performStart(step.task, attempt: step.number, isReplay: true)
        case .failure(let error): attemptCompleted(step.task, attempt: step.number, result: .failure(error), cache: nil)
        }
    }

    private func adaptFailed(_ error: any Error, _ step: AttemptStep) {
        guard isCurrent(step.task, attempt: step.number) else { return }
        let failure =
            error as? APIError ?? .invalidRequest(reason: "an interceptor refused the request", underlying: error)
        failBeforeSending(step.task, attempt: step.number, error: failure)
    }

    /// What the interceptors decided about a response.
    private enum Verdict: Sendable {
        case proceed
        case retry(after: TimeInterval)
        case fail(APIError)
    }

    /// Passes the response through the inspectors, in order, before it is validated; the first
    /// that asks for another attempt decides.
    private static func inspect(
        _ raw: APIRawResponse, _ sent: TransportStage.SentAttempt, _ inspectors: [any APIResponseInspector]
    ) async -> Verdict {
        let context = APIAttempt(task: sent.task, number: sent.number, isReplay: sent.isReplay)
        do {
            for inspector in inspectors {
                if case .retry(let delay) = try await inspector.inspect(raw, to: sent.request, for: context) {
                    return .retry(after: delay)
                }
            }
            return .proceed
        } catch {
            return .fail(error as? APIError ?? .rejected(underlying: error, response: raw))
        }
    }

    private func attemptInspected(_ raw: APIRawResponse, _ sent: TransportStage.SentAttempt, _ verdict: Verdict) {
        switch verdict {
        case .proceed:
            attemptCompleted(sent.task, attempt: sent.number, result: .success(raw), cache: sent.cache)
        case .retry(let delay):
            attemptCompleted(
                sent.task, attempt: sent.number,
                result: .failure(.rejected(underlying: APIRetryRequested(delay: delay), response: raw)), cache: nil,
                requestedRetry: delay)
        case .fail(let error):
            attemptCompleted(sent.task, attempt: sent.number, result: .failure(error), cache: nil)
        }
    }

    /// Runs a task's `work` where ``execution`` says: at once for `.inline`, else on its work queue.
    private func onExecution(of task: AnyAPITask, _ work: @escaping @Sendable () -> Void) {
        if let queue = execution.queue(forTask: task.identifier) {
            queue.async(execute: work)
        } else {
            work()
        }
    }

    /// Keeps the attempt's async step, to be cancelled if the task ends; cancels it at once if the
    /// attempt is over.
    private func track(_ work: any APICancellable, _ step: AttemptStep) {
        transition { machine, actions in
            machine.asyncStepStarted(work, for: step.task, attempt: step.number, into: &actions)
        }
    }

    /// Builds the typed response, then retries the task or ends it. `requestedRetry` is the delay
    /// an interceptor asked for: the attempt then fails with `result`'s error and is retried after it.
    private func attemptCompleted(
        _ task: AnyAPITask, attempt: Int, result: Result<APIRawResponse, APIError>, cache context: CacheContext?,
        requestedRetry: TimeInterval? = nil
    ) {
        // A cheap check first, so a late answer never runs the manager's hooks; the transition below
        // checks again under the lock, since the task may end while the hooks run.
        guard isCurrent(task, attempt: attempt) else { return }
        let outcome: Result<AnyAPITask.BuiltResponse, APIError>
        var source = APIResponseSource.network
        switch ResponseStage.run(task, result: result, cache: context) {
        case .built(let payload, let from):
            outcome = .success(payload)
            source = from
        case .failed(let error):
            outcome = .failure(error)
        }
        var retryDelay: TimeInterval?
        if let requestedRetry {
            retryDelay = requestedRetry.isFinite ? max(0, requestedRetry) : nil
        } else if case .failure(let error) = outcome, Self.mayRetry(error),
            let delay = task.retryDelay(afterAttempt: attempt, error: error), delay.isFinite
        {
            retryDelay = max(0, delay)
        }

        transition { machine, actions in
            machine.attemptEnded(
                task, attempt: attempt, outcome: outcome, source: source, retryDelay: retryDelay, into: &actions)
        }
    }

    /// Delivers a cached copy ahead of the network (`terminal == false`) or as the task's end.
    /// Returns `false`, doing nothing, when the stored response no longer builds a response.
    func deliverCached(_ raw: APIRawResponse, for task: AnyAPITask, attempt: Int, terminal: Bool) -> Bool {
        let outcome = task.buildResponse(raw)
        guard case .success(let payload) = outcome else { return false }
        transition { machine, actions in
            machine.cachedResponse(task, attempt: attempt, response: payload, terminal: terminal, into: &actions)
        }
        return true
    }

    /// Whether the attempt may go to the transport: it is still the task's current one. An attempt
    /// abandoned while it was being built is settled here instead.
    private func claimSend(_ task: AnyAPITask, attempt: Int) -> Bool {
        transition { machine, actions in machine.requestBuilt(task, attempt: attempt, into: &actions) }
            .contains(.send(task, attempt: attempt))
    }

    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        lock.withLock { machine.isCurrent(task, attempt: attempt) }
    }
}
