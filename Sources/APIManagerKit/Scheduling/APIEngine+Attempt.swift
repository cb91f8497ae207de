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
    func performStart(_ task: AnyAPITask, attempt: Int) {
        let monitor = eventMonitor
        var built: BuildRequestStage.Built
        switch BuildRequestStage.run(task, persistedHeaders: persistedHeaders) {
        case .success(let request):
            built = request
        case .failure(let error):
            monitor?(
                APIEvent(
                    kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                    duration: nil, sensitiveHeaders: []))
            attemptCompleted(task, attempt: attempt, result: .failure(error), cache: nil)
            return
        }
        var cacheContext: CacheContext?
        if let cache {
            let lookup = CacheLookupStage.lookUp(
                cache, settings: task.cacheSettings, attempt: attempt, request: built.request,
                sensitiveHeaders: built.sensitiveHeaders, writesBehind: writesBehind)
            switch lookup {
            case .answer(let stored, let otherwise):
                if deliverCached(stored, for: task, attempt: attempt, terminal: true) { return }
                cache.remove(for: otherwise.key)  // no longer builds a response: the network answers
                cacheContext = otherwise
            case .copyFirst(let stored, var then):
                if !deliverCached(stored, for: task, attempt: attempt, terminal: false) {
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
        guard claimSend(task, attempt: attempt) else { return }
        let sent = TransportStage.SentAttempt(
            task: task, number: attempt, request: built.request, startedAt: clock.now,
            options: APITransportOptions(
                sensitiveHeaders: built.sensitiveHeaders, maxResponseBodySize: task.maxResponseBodySize),
            monitor: monitor, cache: cacheContext)
        monitor?(
            APIEvent(
                kind: .started, taskIdentifier: task.identifier, attempt: attempt, request: built.request,
                duration: nil, sensitiveHeaders: built.sensitiveHeaders))
        let handle = transport.send(built.request, options: sent.options) { [weak self] result in
            guard let self else { return }
            switch self.execution {
            case .inline:
                self.transportAnswered(sent, result: result)
            case .queue(let queue):
                // Off the transport's callback queue: responses of different tasks build in parallel.
                queue.async { self.transportAnswered(sent, result: result) }
            }
        }
        transition { machine, actions in machine.attemptSent(task, attempt: attempt, handle: handle, into: &actions) }
    }

    /// What the transport answered, where ``execution`` says.
    private func transportAnswered(_ sent: TransportStage.SentAttempt, result: Result<APIRawResponse, any Error>) {
        let result = TransportStage.answer(result, for: sent, persistedHeaders: persistedHeaders)
        if let monitor = sent.monitor, isCurrent(sent.task, attempt: sent.number) {
            monitor(
                APIEvent(
                    kind: .finished(result), taskIdentifier: sent.task.identifier, attempt: sent.number,
                    request: sent.request, duration: clock.now - sent.startedAt,
                    sensitiveHeaders: sent.options.sensitiveHeaders))
        }
        attemptCompleted(sent.task, attempt: sent.number, result: result, cache: sent.cache)
    }

    /// Builds the typed response, then retries the task or ends it.
    private func attemptCompleted(
        _ task: AnyAPITask, attempt: Int, result: Result<APIRawResponse, APIError>, cache context: CacheContext?
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
        if case .failure(let error) = outcome, Self.mayRetry(error),
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
        lock.withLock { machine.claimSend(task, attempt: attempt) }
    }

    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        lock.withLock { machine.isCurrent(task, attempt: attempt) }
    }
}
