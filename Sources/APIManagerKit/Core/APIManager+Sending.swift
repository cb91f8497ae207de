extension APIManager {
    /// Sends a request under its concurrency policy and returns its task at once. Callable from any
    /// thread, including from inside a delegate callback.
    ///
    /// The outcome arrives through the manager's forwarding methods (and so the delegate): exactly one
    /// of ``task(_:didFinishWith:)`` or ``task(_:didFailWith:)``.
    @discardableResult
    public func send(_ request: Request) -> APITask<Request> {
        let task = makeTask(for: request)
        engine.submit(task)
        return task
    }

    /// Sends a request under its concurrency policy, returns its task at once, and calls
    /// `completion` exactly once with the outcome: the typed response, or the ``APIError`` of a task
    /// that failed, was cancelled, ignored, replaced by a newer one of its scope, or timed out.
    ///
    /// ```swift
    /// api.send(.product(id: 2)) { result in
    ///     switch result {
    ///     case .success(let product): self.product = product
    ///     case .failure(let error): self.failure = error
    ///     }
    /// }
    /// ```
    ///
    /// Where it is called: sent from the main actor (a screen, a view model; any code of an app
    /// target with default isolation `MainActor`), on the main actor, on the delivery's turn when the
    /// delivery is the main queue (the default): right after the manager's terminal forwarding method.
    /// Sent from another actor, on that actor. Sent from code isolated to no actor, on the manager's
    /// ``delivery``. A task whose manager is released before it ends gets
    /// ``APIError/cancelled(reason:)`` `.managerReleased`. The delegate's events are delivered as for
    /// ``send(_:)``.
    ///
    /// The closure is held until the task ends: capture a screen `weak` if the call should not keep
    /// it alive.
    ///
    /// `isolation`: the caller's actor; leave it to its default.
    @discardableResult
    public func send(
        _ request: Request, isolation: isolated (any Actor)? = #isolation,
        completion: @escaping (Result<Response, APIError>) -> Void
    ) -> APITask<Request> {
        let task = makeTask(for: request)
        task.complete(with: TaskCompletion(isolation: isolation, body: completion))
        engine.submit(task)
        return task
    }

    /// Sends a request and waits for its response. Cancelling the calling Swift task cancels the
    /// API task (reason ``APIError/CancellationReason/concurrency``). Delegate events are delivered
    /// as for ``send(_:)``.
    ///
    /// - Throws: the task's ``APIError``.
    public func response(for request: Request) async throws(APIError) -> Response {
        try await responseAndRaw(for: request).0
    }

    /// Sends a request and yields each response it delivers, marked with its source: under
    /// ``APIResponseCache/Option/both`` the cached copy first, then the network's (or the revalidated copy);
    /// otherwise the one response. The stream finishes when the task ends, throwing its ``APIError``
    /// if it failed (after any cached copy). Ending the iteration early cancels the task (reason
    /// ``APIError/CancellationReason/concurrency``).
    public func responses(for request: Request) -> AsyncThrowingStream<
        APIResponseCache.SourcedResponse<Response>, any Error
    > {
        let task = makeTask(for: request)
        return AsyncThrowingStream { continuation in
            continuation.onTermination = { termination in
                if case .cancelled = termination { task.cancel(reason: .concurrency) }
            }
            task.observe { observation in
                switch observation {
                case .cached(let response):
                    continuation.yield(APIResponseCache.SourcedResponse(response: response, source: .cache))
                case .ended(.success(let response), let source, _):
                    continuation.yield(APIResponseCache.SourcedResponse(response: response, source: source ?? .network))
                    continuation.finish()
                case .ended(.failure(let error), _, _):
                    continuation.finish(throwing: error)
                }
            }
            engine.submit(task, observed: true)
        }
    }

    /// Cancels every in-flight task of this manager (reason ``APIError/CancellationReason/explicit``);
    /// the tasks of other managers sharing its engine go on.
    public func cancelAll() {
        engine.cancelTasks(reason: .explicit) { [self] task in isMine(task) }
    }

    /// Cancels the in-flight tasks for which `shouldCancel` returns `true` (reason
    /// ``APIError/CancellationReason/explicit``). The predicate runs on the calling thread, without
    /// any lock held, so it may read the tasks' properties.
    public func cancelTasks(where shouldCancel: (APITask<Request>) throws -> Bool) rethrows {
        try engine.cancelTasks(reason: .explicit) { task in
            guard isMine(task), let task = task as? APITask<Request> else { return false }
            return try shouldCancel(task)
        }
    }

    /// This manager's tasks in flight (not those of other managers sharing its engine): for each
    /// scope, its running tasks (including those waiting for a retry), then its waiting line from
    /// head to tail.
    public var inFlightTasks: [APITask<Request>] {
        engine.inFlightTasks().compactMap { task in isMine(task) ? task as? APITask<Request> : nil }
    }

    /// Whether this manager sent `task`.
    private func isMine(_ task: AnyAPITask) -> Bool {
        (task as? ManagedTask<Self>)?.manager === self
    }

    /// Sends a request and waits for its typed response and the raw response it was built from.
    /// `credentialOrigins`: where its credentials may go (`nil` for anywhere).
    func responseAndRaw(for request: Request, credentialOrigins: [Origin]? = nil) async throws(APIError) -> (
        Response, APIRawResponse?
    ) {
        let task = makeTask(for: request, credentialOrigins: credentialOrigins)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<(Response, APIRawResponse?), APIError>, Never>) in
                task.observe { observation in
                    if case .ended(let outcome, _, let raw) = observation {
                        continuation.resume(returning: outcome.map { ($0, raw) })
                    }
                }
                engine.submit(task, observed: true)
            }
        } onCancel: {
            task.cancel(reason: .concurrency)
        }
        return try outcome.get()
    }

    func makeTask(
        for request: Request, credentialOrigins: [Origin]? = nil, bodyStream: StreamBuffer? = nil,
        addedHeaders: [String: String]? = nil, policy: APIConcurrencyPolicy? = nil
    ) -> ManagedTask<Self> {
        ManagedTask(
            manager: self, request: request, credentialOrigins: credentialOrigins, bodyStream: bodyStream,
            addedHeaders: addedHeaders, policy: policy)
    }
}
