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
        var actions = Actions()
        guard stoppedScopes.remove(key) != nil else { return actions }
        let scope = key.flatMap { namedScopes[$0] } ?? (key == nil ? defaultScope : nil)
        if let scope, !scope.hasRunning { pump(scope, into: &actions) }
        return actions
    }

    /// Whether a final refusal stopped the scope's line.
    func lineIsStopped(_ scope: String?) -> Bool { stoppedScopes.contains(scope) }
}
