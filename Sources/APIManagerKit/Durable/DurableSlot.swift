import Dispatch

/// A durable task's record, from the moment it is written until it is settled: removed, kept as
/// refused, or kept for the next launch. What becomes of it is the scheduling machine's decision
/// when the task ends (``SchedulingMachine/durableSettlement(of:outcome:)``, an action of its `end`);
/// it is carried out once the app has been told the end as well (the first of the async caller's
/// and the delegate's terminal events), whichever of the two comes last (``Settling``).
final class DurableSlot: Sendable {
    struct Entry: Sendable {
        let store: APIEngine.DurableStore
        let scope: String?
        let sequence: UInt64
        /// Whether the task is one of its replay's window (its settling lets the next record in).
        var inWindow = false
    }

    /// What becomes of the record when its task ends.
    enum Settlement: Equatable, Sendable, CustomStringConvertible {
        /// The task ended (with a response, a failure, a cancellation): the record goes.
        case remove
        /// A final refusal stopped the line (``APIEngine/DurableStore/Refusal/stopTheLine``): the
        /// record is kept as refused, for the app to resolve.
        case keepRefused
        /// The task's manager or engine went away: the record stays for the next launch.
        case keepForRelaunch

        var description: String {
            switch self {
            case .remove: return "remove"
            case .keepRefused: return "keepRefused"
            case .keepForRelaunch: return "keepForRelaunch"
            }
        }
    }

    /// The two things a record waits for before it is settled, in either order: the machine's
    /// decision and the app being told. Each event returns the settlement to carry out now, or
    /// `nil`; only the second of the pair returns one, once (a repeated event returns `nil`).
    ///
    /// Invariant: a settlement is returned at most once, and only after both events came.
    struct Settling: Equatable {
        enum Phase: Equatable {
            case waiting(decided: Settlement?, told: Bool)
            case settled
        }

        private(set) var phase = Phase.waiting(decided: nil, told: false)

        /// The machine decided what becomes of the record (a later decision changes nothing).
        mutating func decide(_ settlement: Settlement) -> Settlement? {
            guard case .waiting(decided: nil, let told) = phase else { return nil }
            guard told else {
                phase = .waiting(decided: settlement, told: false)
                return nil
            }
            phase = .settled
            return settlement
        }

        /// The app was told the task's end (by the async caller's or the delegate's terminal event).
        mutating func told() -> Settlement? {
            guard case .waiting(let decided, told: false) = phase else { return nil }
            guard let decided else {
                phase = .waiting(decided: nil, told: true)
                return nil
            }
            phase = .settled
            return decided
        }
    }

    private struct State {
        var entry: Entry?
        var settling = Settling()
    }

    private let state = LockedState(State())
    /// Whether the task was restored from its record (see ``AnyAPITask/isRestored``).
    let isRestored: Bool
    /// Whether a final refusal of the task stops its line (its store's rule for its scope).
    let stopsTheLineWhenRefused: Bool
    /// Whether the task sends a refused task again (``APIEngine/DurableStore/Resolution/retry``): it
    /// goes to the front of its stopped line.
    let retriesRefusal: Bool

    init(isRestored: Bool, stopsTheLineWhenRefused: Bool = false, retriesRefusal: Bool = false) {
        self.isRestored = isRestored
        self.stopsTheLineWhenRefused = stopsTheLineWhenRefused
        self.retriesRefusal = retriesRefusal
    }

    /// The record was written (or restored) as `entry`.
    func fill(_ entry: Entry) {
        state.withLock { $0.entry = entry }
    }

    /// The machine's decision (the action ``SchedulingMachine/Action/settleDurable(_:_:)``), performed
    /// by `engine` after its lock is released, on the thread that ended the task.
    func decide(_ settlement: Settlement, engine: APIEngine?) {
        let (entry, due) = state.withLock { ($0.entry, $0.settling.decide(settlement)) }
        if let entry, let due { Self.carryOut(due, of: entry, engine: engine, offTheDeliveryQueue: false) }
    }

    /// The app was told the end: by the async caller's observer (on the thread that ended the task),
    /// or by the delegate's terminal event (`onTheDeliveryQueue`: a record that goes is removed on
    /// a work queue, not on the delivery queue, the main queue by default).
    func told(engine: APIEngine?, onTheDeliveryQueue: Bool) {
        let (entry, due) = state.withLock { ($0.entry, $0.settling.told()) }
        if let entry, let due { Self.carryOut(due, of: entry, engine: engine, offTheDeliveryQueue: onTheDeliveryQueue) }
    }

    /// Removes or keeps the record, then lets the next record of a replay's window in (when the
    /// manager is gone, the refill finds it gone too and lets the line's other tasks go).
    private static func carryOut(
        _ settlement: Settlement, of entry: Entry, engine: APIEngine?, offTheDeliveryQueue: Bool
    ) {
        switch settlement {
        case .keepForRelaunch:
            if entry.inWindow { engine?.refillDurableLine(entry.scope, from: entry.store) }
        case .keepRefused:
            // On the thread that was told: the app may resolve the refusal as soon as it is told.
            entry.store.keepRefused(entry.sequence, scope: entry.scope)
            if entry.inWindow { engine?.refillDurableLine(entry.scope, from: entry.store) }
        case .remove:
            if offTheDeliveryQueue, let queue = engine?.execution.queue(forTask: entry.sequence) {
                queue.async { [weak engine] in remove(entry, engine: engine) }
            } else {
                remove(entry, engine: engine)
            }
        }
    }

    private static func remove(_ entry: Entry, engine: APIEngine?) {
        entry.store.remove(entry.sequence, scope: entry.scope)
        if entry.inWindow { engine?.refillDurableLine(entry.scope, from: entry.store) }
    }
}
