import Foundation

extension APIManager {
    /// Opens the durable line of `scope` (``APIConcurrencyPolicy/durable``) and sends again, in
    /// their original order and each with its original idempotency key, the tasks an earlier run (or
    /// an earlier engine on the same store) left there without seeing them end. Call it once when the
    /// app starts, before sending new tasks into the scope, to get the tasks back; the first durable
    /// task sent into the scope replays them anyway, before itself, if this was not called.
    ///
    /// A record that cannot be sent again (damaged, or a request that no longer decodes as
    /// `Request` after an app update) is moved into the scope's `set-aside` folder, never deleted,
    /// and listed in the result; the line goes on without it. Called again for a scope already open,
    /// it replays nothing.
    ///
    /// - Throws: ``APIError/durableStore(reason:underlying:)`` when the engine has no durable store,
    ///   or the scope's folder cannot be opened (another process has it open).
    @discardableResult
    public func replayDurableTasks(inScope scope: String?) throws(APIError) -> APIEngine.DurableStore.Replay<Self> {
        let (stream, continuation) = AsyncStream.makeStream(of: APIEngine.DurableStore.Replay<Self>.Outcome.self)
        let outcomes = ReplayOutcomes<Self>(continuation)
        let opened: APIEngine.DurableStore.Opened
        do {
            opened =
                try engine.replayDurableLine(scope, restoringWith: outcomes.restorer(for: self))
                ?? APIEngine.DurableStore.Opened()
        } catch {
            continuation.finish()
            throw error
        }
        outcomes.expect(opened.count)
        return APIEngine.DurableStore.Replay(
            count: opened.count, setAside: opened.setAside, stoppedBy: opened.stoppedBy, outcomes: stream)
    }

    /// Resolves the final refusal that stopped the durable line of `scope`
    /// (``APIEngine/DurableStore/Refusal/stopTheLine``): ``APIEngine/DurableStore/Resolution/retry``
    /// sends the refused request again, first, with its idempotency key, and returns its task;
    /// ``APIEngine/DurableStore/Resolution/drop`` removes its record and returns `nil`. Either way the
    /// line then goes on. Opens (and replays) the scope first if this run had not.
    ///
    /// - Throws: ``APIError/durableStore(reason:underlying:)`` when the engine has no durable store,
    ///   the scope cannot be opened, its line is not stopped, or the refused record cannot be read
    ///   back (or no longer decodes as `Request`).
    @discardableResult
    public func resolveRefusedDurableTask(
        inScope scope: String?, by resolution: APIEngine.DurableStore.Resolution
    ) throws(APIError) -> APITask<Request>? {
        let step: APIEngine.DurableStore.ResolutionStep = resolution == .retry ? .retry : .drop
        let retried = try engine.resolveRefusal(in: scope, by: step, restoringWith: .restoring(for: self)) { record in
            ManagedTask<Self>.restore(record, for: self, retryingRefusal: true)
        }
        return retried as? APITask<Request>
    }

    /// Resolves the final refusal that stopped the durable line of `scope` by sending `request` in
    /// the refused request's place, first (an edited version of it: a new operation, with an
    /// idempotency key of its own); the refused record is removed and the line goes on behind it.
    ///
    /// - Throws: ``APIError/durableStore(reason:underlying:)`` as
    ///   ``resolveRefusedDurableTask(inScope:by:)`` does, or when `request` is not a durable request
    ///   of `scope`, or cannot be written.
    @discardableResult
    public func resolveRefusedDurableTask(
        inScope scope: String?, replacingWith request: Request
    ) throws(APIError) -> APITask<Request> {
        guard request.concurrencyPolicy == .durable, request.concurrencyScope == scope else {
            throw .durableStore(
                reason: "the replacement must be a durable request of the stopped line's scope "
                    + "\(DurableScopeFolder.describe(scope))")
        }
        let task = ManagedTask(manager: self, request: request, policy: .durable, retryingRefusal: true)
        let description = Result { () throws(APIError) in try task.durableDescription() }
        _ = try engine.resolveRefusal(
            in: scope, by: .replace(task, description: description), restoringWith: .restoring(for: self)
        ) { record in
            ManagedTask<Self>.restore(record, for: self, retryingRefusal: true)
        }
        return task
    }
}

/// Feeds a replay's ``APIEngine/DurableStore/Replay/outcomes``: each restored task's end, then the
/// end of the sequence once every one has ended.
private final class ReplayOutcomes<Manager: APIManager>: Sendable {
    private let continuation: AsyncStream<APIEngine.DurableStore.Replay<Manager>.Outcome>.Continuation
    /// How many ends are still to come; `nil` until the replay knows how many tasks it restored.
    private let pending = LockedState<(ended: Int, lost: Int, expected: Int?)>((0, 0, nil))

    init(_ continuation: AsyncStream<APIEngine.DurableStore.Replay<Manager>.Outcome>.Continuation) {
        self.continuation = continuation
    }

    func ended(_ task: APITask<Manager.Request>, with result: Result<Manager.Response, APIError>) {
        continuation.yield(APIEngine.DurableStore.Replay<Manager>.Outcome(task: task, result: result))
        let done = pending.withLock { pending -> Bool in
            pending.ended += 1
            return pending.expected.map { pending.ended + pending.lost >= $0 } ?? false
        }
        if done { continuation.finish() }
    }

    /// Restores tasks of `manager` (held weakly), each observed: its end goes to these outcomes.
    func restorer(for manager: Manager) -> DurableRestorer {
        let restoring = DurableRestorer.restoring(for: manager)
        return DurableRestorer(
            restore: { record in
                restoring.restore(record).map { task in
                    guard let task = task as? ManagedTask<Manager> else { return task }
                    task.observe { [weak task] observation in
                        guard case .ended(let result, _, _) = observation, let task else { return }
                        self.ended(task, with: result)
                    }
                    return task
                }
            },
            lost: { count in self.lost(count) })
    }

    func expect(_ count: Int) {
        let done = pending.withLock { pending -> Bool in
            pending.expected = count
            return pending.ended + pending.lost >= count
        }
        if done { continuation.finish() }
    }

    /// `count` of the expected tasks will never be made (see ``DurableRestorer/lost``).
    func lost(_ count: Int) {
        let done = pending.withLock { pending -> Bool in
            pending.lost += count
            return pending.expected.map { pending.ended + pending.lost >= $0 } ?? false
        }
        if done { continuation.finish() }
    }
}
