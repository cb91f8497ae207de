import Foundation

extension APIEngine {
    /// Sends a ``APIConcurrencyPolicy/durable`` task: its scope opened (and replayed) first, then the
    /// task written and sent, in the store's order; or, when it cannot be written, ended at once
    /// with the reason, never sent.
    func submitDurably(_ task: AnyAPITask, observed: Bool) {
        guard let durableStore else {
            transition(sending: task) {
                $0.sendRefused(
                    task, observed: observed,
                    error: .durableStore(
                        reason: "a durable task needs the engine's durable store (APIEngine.Configuration.durableStore)"
                    ))
            }
            return
        }
        // Told before the store writes it: no other thread sees the task before its observers do.
        tellSent(task)
        let line = DurableLineEvents(engine: self, scope: task.concurrencyScope, sentIsObserved: observed)
        let refusal = durableStore.write(task, line: line)
        line.perform()
        if let refusal { transition { $0.sendRefused(task, observed: observed, error: refusal) } }
    }

    /// Sends again what `scope`'s durable line held, if this engine's store had not opened it yet
    /// (`nil` when it had); `restorer` makes the records into the manager's tasks.
    func replayDurableLine(
        _ scope: String?, restoringWith restorer: DurableRestorer
    ) throws(APIError) -> APIEngine.DurableStore.Opened? {
        guard let durableStore else {
            throw .durableStore(
                reason:
                    "replaying a durable line needs the engine's durable store (APIEngine.Configuration.durableStore)")
        }
        let line = DurableLineEvents(engine: self, scope: scope, sentIsObserved: false)
        defer { line.perform() }
        return try durableStore.replay(scope, restoringWith: restorer, line: line)
    }

    /// Resolves the refusal that stopped `scope`'s durable line (see
    /// ``APIManager/resolveRefusedDurableTask(inScope:by:)``); `restore` makes the retried task.
    func resolveRefusal(
        in scope: String?, by resolution: APIEngine.DurableStore.ResolutionStep,
        restoringWith restorer: DurableRestorer,
        restore: (DurableRecord) -> Result<AnyAPITask, APIError>
    ) throws(APIError) -> AnyAPITask? {
        guard let durableStore else {
            throw .durableStore(
                reason: "resolving a refusal needs the engine's durable store (APIEngine.Configuration.durableStore)")
        }
        let line = DurableLineEvents(engine: self, scope: scope, sentIsObserved: false)
        defer { line.perform() }
        return try durableStore.resolve(scope, by: resolution, restoringWith: restorer, restore: restore, line: line)
    }

    /// A task of `scope`'s replay window ended: `store` (this engine's) lets the line's next records in.
    ///
    /// On an inline engine a refill's tasks may end inside it and ask for the next refill: the
    /// engine's start trampoline runs each start after the call that decided it returned, so the
    /// refills follow one another rather than nest.
    func refillDurableLine(_ scope: String?, from store: APIEngine.DurableStore) {
        let line = DurableLineEvents(engine: self, scope: scope, sentIsObserved: false)
        store.refill(scope, line: line)
        line.perform()
    }

    /// What a durable store tells one scope's line while it holds its own lock: each is an event of
    /// the machine, run at once under the engine's lock (so the line's order is the store's), whose
    /// actions are performed by ``perform()`` once the store's lock is released.
    ///
    /// Used on one thread, by the call that made it.
    final class DurableLineEvents {
        private unowned let engine: APIEngine
        private let scope: String?
        /// Whether the task the call sends (not a restored one) has an async caller.
        private let sentIsObserved: Bool
        /// What each event decided.
        private var decided: [(SchedulingMachine.Actions, APIEngine.DeliveryRun?)] = []

        init(engine: APIEngine, scope: String?, sentIsObserved: Bool) {
            self.engine = engine
            self.scope = scope
            self.sentIsObserved = sentIsObserved
        }

        /// A task joins the line: a restored one is observed when its replay's restorer gave it an
        /// observer (the replay's outcomes). The engine's observers are told it was sent before it
        /// joins (the task the call sends was told before the store's lock was taken; a restored
        /// one is told here, on the thread that replays or refills, with the store's lock held).
        func send(_ task: AnyAPITask) {
            let observed = task.isRestored ? task.isObserved : sentIsObserved
            engine.tellSent(task)
            decide { $0.send(task, observed: observed) }
        }

        /// A kept refusal stops the line.
        func stop() { decide { [scope] in $0.stopLine(of: scope) } }
        /// The app resolved the refusal: the line moves again.
        func resume() { decide { [scope] in $0.resumeLine(of: scope) } }
        /// Restored records are still on disk: only restored tasks start.
        func holdBehindBacklog() { decide { [scope] in $0.holdBehindBacklog(of: scope) } }
        /// The last restored record is a task: the line's other tasks may start again.
        func backlogDrained() { decide { [scope] in $0.backlogDrained(of: scope) } }

        /// Performs what the events decided, in order; called after the store's lock is released.
        func perform() {
            let decided = self.decided
            self.decided = []
            for (actions, run) in decided { engine.perform(actions, delivery: run) }
            // A line stopped or moving again, a backlog taken: what a scope's model shows.
            if !decided.isEmpty { engine.activityMayHaveChanged() }
        }

        private func decide(_ event: (inout SchedulingMachine) -> SchedulingMachine.Actions) {
            decided.append(engine.decide(event))
        }
    }
}
