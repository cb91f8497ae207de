import Foundation

extension APIConcurrencyPolicy {
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
    public final class Group: Sendable, CustomStringConvertible {
        /// The most tasks of the group that run at once (at least 1).
        public let limit: Int
        private let state = LockedState(State())

        private struct State {
            var inUse = 0
            var nextOrder: UInt64 = 0
            /// The line: the waiting tasks' places, best first at the top (a binary heap, so a task
            /// joins and leaves it in O(log n)). A place whose task withdrew stays until it comes up.
            var line = GroupLine()
            /// The waiting tasks by their place's order, and each one's order.
            var waiting: [UInt64: AnyAPITask] = [:]
            var orders: [ObjectIdentifier: UInt64] = [:]
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
            return "APIConcurrencyPolicy.Group(limit: \(limit), running: \(running), waiting: \(waiting))"
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
                let order = state.nextOrder
                state.waiting[order] = task
                state.orders[ObjectIdentifier(task)] = order
                state.line.push(GroupLine.Place(priority: task.priority, order: order))
                return false
            }
        }

        /// Gives a slot back; returns the waiting task it now belongs to, if any (its engine is told
        /// after its own lock is released).
        func release() -> AnyAPITask? {
            state.withLock { state in
                while let place = state.line.pop() {
                    guard let task = state.waiting.removeValue(forKey: place.order) else { continue }  // withdrawn
                    state.orders[ObjectIdentifier(task)] = nil
                    return task  // the slot passes to it, still in use
                }
                state.inUse = max(0, state.inUse - 1)
                return nil
            }
        }

        /// A waiting task ended: it leaves the group's line.
        func withdraw(_ task: AnyAPITask) {
            state.withLock { state in
                guard let order = state.orders.removeValue(forKey: ObjectIdentifier(task)) else { return }
                state.waiting[order] = nil
                // Places of withdrawn tasks are dropped once they outnumber the live ones.
                if state.line.count > 2 * state.waiting.count + 32 {
                    state.line = GroupLine(
                        state.waiting.map { GroupLine.Place(priority: $0.value.priority, order: $0.key) })
                }
            }
        }
    }
}

/// The places in a group's line, as a binary heap: the highest priority on top, then the lowest
/// order (the first to ask).
struct GroupLine {
    struct Place {
        let priority: Int
        let order: UInt64

        func precedes(_ other: Place) -> Bool {
            priority != other.priority ? priority > other.priority : order < other.order
        }
    }

    private var places: [Place] = []

    init() {}

    init(_ places: [Place]) {
        for place in places { push(place) }
    }

    var count: Int { places.count }

    mutating func push(_ place: Place) {
        places.append(place)
        var child = places.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard places[child].precedes(places[parent]) else { break }
            places.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Place? {
        guard let top = places.first else { return nil }
        let last = places.removeLast()
        guard !places.isEmpty else { return top }
        places[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var best = parent
            if left < places.count, places[left].precedes(places[best]) { best = left }
            if right < places.count, places[right].precedes(places[best]) { best = right }
            if best == parent { break }
            places.swapAt(parent, best)
            parent = best
        }
        return top
    }
}
