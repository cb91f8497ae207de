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
    public func replayDurableTasks(inScope scope: String?) throws(APIError) -> APIEngine.DurableStore.Replay<Request> {
        let template = DurableTemplate(manager: self)
        let (restored, setAside) = try engine.replayDurableLine(scope, restoringWith: template)
        return APIEngine.DurableStore.Replay(
            tasks: restored.compactMap { $0 as? APITask<Request> }, setAside: setAside)
    }
}

/// A task that is never sent, standing for its manager when a replay needs the manager's types to
/// decode records.
private final class DurableTemplate<Manager: APIManager>: AnyAPITask, @unchecked Sendable {
    // @unchecked: adds only a weak reference, which is thread-safe.
    weak var manager: Manager?

    init(manager: Manager) {
        self.manager = manager
        super.init(identifier: 0, settings: Settings(policy: .durable), engine: manager.engine)
    }

    override func restoredTask(from record: DurableRecord) -> Result<AnyAPITask, APIError> {
        guard let manager else { return .failure(.cancelled(reason: .managerReleased)) }
        return ManagedTask<Manager>.restore(record, for: manager)
    }
}
