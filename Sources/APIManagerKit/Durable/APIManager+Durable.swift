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
        let (outcomes, continuation) = AsyncStream.makeStream(of: APIEngine.DurableStore.Replay<Self>.Outcome.self)
        let template = DurableTemplate(manager: self, outcomes: ReplayOutcomes(continuation))
        let opened: APIEngine.DurableStore.Opened
        do {
            opened = try engine.replayDurableLine(scope, restoringWith: template) ?? APIEngine.DurableStore.Opened()
        } catch {
            continuation.finish()
            throw error
        }
        template.outcomes.expect(opened.count)
        return APIEngine.DurableStore.Replay(
            count: opened.count, setAside: opened.setAside, stoppedBy: opened.stoppedBy, outcomes: outcomes)
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
        let template = resolutionTemplate()
        let step: APIEngine.DurableStore.ResolutionStep = resolution == .retry ? .retry : .drop
        let retried = try engine.resolveRefusal(in: scope, by: step, restoringWith: template) { record in
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
        let template = resolutionTemplate()
        _ = try engine.resolveRefusal(
            in: scope, by: .replace(task, description: description), restoringWith: template
        ) { record in
            ManagedTask<Self>.restore(record, for: self, retryingRefusal: true)
        }
        return task
    }

    /// The template a resolution decodes records with (when it opens the scope first); its replay's
    /// outcomes go nowhere.
    private func resolutionTemplate() -> AnyAPITask {
        let (_, continuation) = AsyncStream.makeStream(of: APIEngine.DurableStore.Replay<Self>.Outcome.self)
        continuation.finish()
        return DurableTemplate(manager: self, outcomes: ReplayOutcomes(continuation))
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

    func expect(_ count: Int) {
        let done = pending.withLock { pending -> Bool in
            pending.expected = count
            return pending.ended + pending.lost >= count
        }
        if done { continuation.finish() }
    }

    /// `count` of the expected tasks will never be made (see ``AnyAPITask/restoredRecordsLost(_:)``).
    func lost(_ count: Int) {
        let done = pending.withLock { pending -> Bool in
            pending.lost += count
            return pending.expected.map { pending.ended + pending.lost >= $0 } ?? false
        }
        if done { continuation.finish() }
    }
}

/// A task that is never sent, standing for its manager when a replay needs the manager's types to
/// decode records.
private final class DurableTemplate<Manager: APIManager>: AnyAPITask, @unchecked Sendable {
    // @unchecked: adds a weak reference, which is thread-safe, and an immutable Sendable one.
    weak var manager: Manager?
    let outcomes: ReplayOutcomes<Manager>

    init(manager: Manager, outcomes: ReplayOutcomes<Manager>) {
        self.manager = manager
        self.outcomes = outcomes
        super.init(
            identifier: 0, settings: Settings(policy: .durable), engine: manager.engine,
            recordKeeper: manager.engine.state)
    }

    override func restoredRecordsLost(_ count: Int) { outcomes.lost(count) }

    /// The restored task, observed: its end goes to the replay's outcomes.
    override func restoredTask(from record: DurableRecord) -> Result<AnyAPITask, APIError> {
        guard let manager else { return .failure(.cancelled(reason: .managerReleased)) }
        return ManagedTask<Manager>.restore(record, for: manager).map { task in
            guard let task = task as? ManagedTask<Manager> else { return task }
            let outcomes = self.outcomes
            task.observe { [weak task] observation in
                guard case .ended(let result, _, _) = observation, let task else { return }
                outcomes.ended(task, with: result)
            }
            return task
        }
    }
}
