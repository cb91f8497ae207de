/// How a durable line's records become tasks again, as a value: its manager's request type decodes
/// each record (``ManagedTask/restore(_:for:retryingRefusal:)``), and a replay's restorer also gives
/// each task it makes to the replay's outcomes. Held by the store while it opens a scope and for
/// the records it leaves on disk (its backlog); no task stands in for the manager.
struct DurableRestorer: Sendable {
    /// The task a record describes; `cancelled(managerReleased)` once the manager is gone.
    let restore: @Sendable (DurableRecord) -> Result<AnyAPITask, APIError>
    /// `count` records the replay counted could not be made into tasks after all (changed on disk
    /// since, or their manager is gone): its outcomes stop waiting for them.
    let lost: @Sendable (Int) -> Void

    init(
        restore: @escaping @Sendable (DurableRecord) -> Result<AnyAPITask, APIError>,
        lost: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.restore = restore
        self.lost = lost
    }

    /// Restores tasks of `manager` (held weakly), unobserved: the records a durable task's send finds
    /// when it opens its scope.
    static func restoring<Manager: APIManager>(for manager: Manager) -> DurableRestorer {
        DurableRestorer { [weak manager] record in
            guard let manager else { return .failure(.cancelled(reason: .managerReleased)) }
            return ManagedTask<Manager>.restore(record, for: manager)
        }
    }

    /// What a task without a manager restores with: nothing.
    static let withoutManager = DurableRestorer { _ in
        .failure(.durableStore(reason: "the record cannot be restored without a manager"))
    }
}
