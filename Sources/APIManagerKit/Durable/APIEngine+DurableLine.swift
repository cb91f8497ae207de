import Foundation

extension APIEngine {
    /// Sends a ``APIConcurrencyPolicy/durable`` task: its scope opened (and replayed) first, then the
    /// task written and sent, in the store's order; or, when it cannot be written, ended at once
    /// with the reason, never sent.
    func submitDurably(_ task: AnyAPITask, observed: Bool) {
        guard let durableStore else {
            transition {
                $0.sendRefused(
                    task, observed: observed,
                    error: .durableStore(
                        reason: "a durable task needs the engine's durable store (APIEngine.Configuration.durableStore)"
                    ))
            }
            return
        }
        var decided: [(SchedulingMachine.Actions, APIEngine.Delivery?)] = []
        let (_, _, refusal) = durableStore.write(
            task, stop: { [scope = task.concurrencyScope] in decided.append(decide { $0.stopLine(of: scope) }) },
            send: { sent in decided.append(decide { $0.send(sent, observed: sent === task && observed) }) })
        for (actions, delivery) in decided { perform(actions, delivery: delivery) }
        if let refusal { transition { $0.sendRefused(task, observed: observed, error: refusal) } }
    }

    /// Sends again what `scope`'s durable line held, if this engine's store had not opened it yet;
    /// `template` is a task of the manager that decodes the records.
    func replayDurableLine(
        _ scope: String?, restoringWith template: AnyAPITask
    ) throws(APIError) -> (
        restored: [AnyAPITask], setAside: [APIEngine.DurableStore.SetAside], stoppedBy: URL?
    ) {
        guard let durableStore else {
            throw .durableStore(
                reason:
                    "replaying a durable line needs the engine's durable store (APIEngine.Configuration.durableStore)")
        }
        var decided: [(SchedulingMachine.Actions, APIEngine.Delivery?)] = []
        // The restored tasks are observed: the template gave each an observer (the replay's outcomes).
        let replay = try durableStore.replay(
            scope, restoringWith: template, stop: { decided.append(decide { $0.stopLine(of: scope) }) },
            send: { sent in decided.append(decide { $0.send(sent, observed: true) }) })
        for (actions, delivery) in decided { perform(actions, delivery: delivery) }
        return replay
    }

    /// Resolves the refusal that stopped `scope`'s durable line (see
    /// ``APIManager/resolveRefusedDurableTask(inScope:by:)``); `restore` makes the retried task.
    func resolveRefusal(
        in scope: String?, by resolution: APIEngine.DurableStore.ResolutionStep, restoringWith template: AnyAPITask,
        restore: (DurableRecord) -> Result<AnyAPITask, APIError>
    ) throws(APIError) -> AnyAPITask? {
        guard let durableStore else {
            throw .durableStore(
                reason: "resolving a refusal needs the engine's durable store (APIEngine.Configuration.durableStore)")
        }
        var decided: [(SchedulingMachine.Actions, APIEngine.Delivery?)] = []
        let retried = try durableStore.resolve(
            scope, by: resolution, restoringWith: template, restore: restore,
            stop: { decided.append(decide { $0.stopLine(of: scope) }) },
            send: { sent in decided.append(decide { $0.send(sent, observed: false) }) },
            resume: { decided.append(decide { $0.resumeLine(of: scope) }) })
        for (actions, delivery) in decided { perform(actions, delivery: delivery) }
        return retried
    }

    /// Runs an event of the machine under the lock and returns what to perform, for a caller that
    /// performs it later (after releasing a lock of its own: see ``transition(reportingTo:_:)``).
    private func decide(
        _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions
    ) -> (SchedulingMachine.Actions, APIEngine.Delivery?) {
        state.withLock { state in
            let actions = event(&state.machine)
            return (actions, actions.deliverEvents ? state.delivery : nil)
        }
    }
}
