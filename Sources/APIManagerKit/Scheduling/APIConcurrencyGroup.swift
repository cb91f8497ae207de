import Foundation

/// A limit on running tasks shared by several managers or engines: four image managers, one budget
/// of six connections (see ``APIRequest/concurrencyGroup``).
///
/// A task of a group starts only when its own policy would start it **and** the group has a free
/// slot; otherwise it waits for one (its state `.waiting`), with the other waiting tasks of the
/// group, whatever their manager: the highest ``APIRequest/priority`` first, then in the order they
/// asked. A task keeps its slot while it waits for a retry, and gives it back when it ends. Managers
/// in a group stay separate in everything else: `cancelAll()`, `inFlightTasks` and the delegate are
/// each manager's own.
///
/// **Locking rule.** The group's lock is a leaf: an engine may take it while holding its own lock,
/// but the group never takes an engine's lock, nor calls out, while holding it. A slot freed by one
/// engine's task is handed to another engine's task after the first engine's lock is released.
public final class APIConcurrencyGroup: Sendable, CustomStringConvertible {
    /// The most tasks of the group that run at once (at least 1).
    public let limit: Int
    private let state = LockedState(State())

    private struct State {
        var inUse = 0
        var nextOrder: UInt64 = 0
        /// Waiting tasks, best first: priority (highest first), then the order they asked.
        var waiting: [Waiter] = []
    }

    private struct Waiter {
        let task: AnyAPITask
        let priority: Int
        let order: UInt64
    }

    /// - Parameter limit: the most tasks that run at once; values under `1` count as `1`.
    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// The number of the group's tasks running now.
    public var runningCount: Int { state.withLock { $0.inUse } }

    /// The number of the group's tasks waiting for a slot.
    public var waitingCount: Int { state.withLock { $0.waiting.count } }

    public var description: String {
        let (running, waiting) = state.withLock { ($0.inUse, $0.waiting.count) }
        return "APIConcurrencyGroup(limit: \(limit), running: \(running), waiting: \(waiting))"
    }

    // MARK: What engines ask (under their own lock; this lock is a leaf)

    /// Takes a slot for `task`, or puts it in the group's line; `true` when it got one.
    func acquire(for task: AnyAPITask) -> Bool {
        state.withLock { state in
            if state.inUse < limit && state.waiting.isEmpty {
                state.inUse += 1
                return true
            }
            state.nextOrder += 1
            let waiter = Waiter(task: task, priority: task.priority, order: state.nextOrder)
            let index = state.waiting.firstIndex { $0.priority < waiter.priority } ?? state.waiting.endIndex
            state.waiting.insert(waiter, at: index)
            return false
        }
    }

    /// Gives a slot back; returns the waiting task it now belongs to, if any (its engine is told
    /// after its own lock is released).
    func release() -> AnyAPITask? {
        state.withLock { state in
            if state.waiting.isEmpty {
                state.inUse = max(0, state.inUse - 1)
                return nil
            }
            return state.waiting.removeFirst().task  // the slot passes to it, still in use
        }
    }

    /// A waiting task ended: it leaves the group's line.
    func withdraw(_ task: AnyAPITask) {
        state.withLock { state in state.waiting.removeAll { $0.task === task } }
    }
}
