/// A durable line stopped by a final refusal (``APIEngine/DurableStore/Refusal/stopTheLine``): the
/// refused task ended (``end(_:with:source:into:pump:notify:attemptIsOver:)`` stops its scope), the
/// tasks behind it and those sent later wait in the line, and the app's resolution starts it again.
extension SchedulingMachine {
    /// The scope's line is stopped (replayed from a store that kept a refused record).
    mutating func stopLine(of scope: String?) -> Actions {
        stoppedScopes.insert(scope)
        return Actions()
    }

    /// The app resolved the refusal: the line moves again (a retried task, sent just before, waits at
    /// its front).
    mutating func resumeLine(of key: String?) -> Actions {
        guard stoppedScopes.remove(key) != nil else { return Actions() }
        return pumpIfIdle(key)
    }

    /// Whether a final refusal stopped the scope's line.
    func lineIsStopped(_ scope: String?) -> Bool { !stoppedScopes.isEmpty && stoppedScopes.contains(scope) }

    /// The scope's replay left restored records on disk (more than its store keeps in memory): until
    /// they are all made into tasks, only restored tasks start.
    mutating func holdBehindBacklog(of scope: String?) -> Actions {
        durableBacklogs.insert(scope)
        return Actions()
    }

    /// The store made the last of the scope's restored records into a task: this run's tasks may
    /// start again, behind the restored ones.
    mutating func backlogDrained(of key: String?) -> Actions {
        guard durableBacklogs.remove(key) != nil else { return Actions() }
        return pumpIfIdle(key)
    }

    /// Starts the head of the line of the scope named `key`, if it is open and nothing of it runs.
    private mutating func pumpIfIdle(_ key: String?) -> Actions {
        var actions = Actions()
        if let scope = openScope(key), !scope.hasRunning { pump(scope, into: &actions) }
        return actions
    }

    /// Whether the scope's replay still has restored records on disk.
    func lineHasBacklog(_ scope: String?) -> Bool { !durableBacklogs.isEmpty && durableBacklogs.contains(scope) }

    /// What becomes of a durable task's record when it ends (`nil`: the task is not durable): the
    /// one place a refusal is judged final. Kept for the next launch when its manager or engine went
    /// away; kept as refused when a final refusal stops its line (its store's rule for its scope);
    /// removed otherwise.
    static func durableSettlement(
        of task: AnyAPITask, outcome: Result<AnyAPITask.BuiltResponse, APIError>
    ) -> DurableSlot.Settlement? {
        guard let slot = task.bag.durableSlot else { return nil }
        guard case .failure(let error) = outcome else { return .remove }
        if case .cancelled(reason: .managerReleased) = error { return .keepForRelaunch }
        if slot.stopsTheLineWhenRefused, APIEngine.DurableStore.isFinalRefusal(error) { return .keepRefused }
        return .remove
    }

    /// Where a durable task joins its line: a task retrying a refusal at the front (it was first), a
    /// restored one behind the restored ones (they are older than this run's), else by priority.
    static func durablePlace(of task: AnyAPITask) -> ScopeState.Place {
        guard let slot = task.bag.durableSlot else { return .byPriority }
        if slot.retriesRefusal { return .front }
        return slot.isRestored ? .restored : .byPriority
    }
}
