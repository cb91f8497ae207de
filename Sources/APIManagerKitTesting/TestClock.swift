import APIManagerKit
import Foundation

/// A clock whose time moves only when the test says so.
///
/// Timers scheduled on it fire during ``advance(by:)``, on the calling thread, in order of due time
/// (ties in the order they were scheduled), with ``now`` set to each timer's due time as it fires. A
/// timer scheduled by a firing action fires in the same call if it falls due within it.
public final class TestClock: APIClock, @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, read and written only under `lock`.
    private struct Timer {
        let id: Int
        let dueTime: TimeInterval
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: TimeInterval = 0
        var nextID = 0
        var timers: [Timer] = []
    }

    private let lock = NSLock()
    private var state = State()
    private let startDate: Date

    /// - Parameter startDate: what ``date`` reads at time zero. 2023-11-14 22:13:20 UTC unless given.
    public init(startDate: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        self.startDate = startDate
    }

    /// Seconds since the clock was made, moved only by ``advance(by:)``.
    public var now: TimeInterval { lock.withLock { state.now } }

    /// `startDate + now`.
    public var date: Date { startDate.addingTimeInterval(now) }

    /// The number of timers scheduled and not yet fired or cancelled.
    public var pendingTimerCount: Int { lock.withLock { state.timers.count } }

    /// The due time of the next timer, if any.
    public var nextDueTime: TimeInterval? { lock.withLock { state.timers.first?.dueTime } }

    public func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> any APICancellable {
        lock.withLock {
            state.nextID += 1
            let timer = Timer(id: state.nextID, dueTime: state.now + max(0, delay), action: action)
            let index = state.timers.firstIndex { $0.dueTime > timer.dueTime } ?? state.timers.endIndex
            state.timers.insert(timer, at: index)
            return Cancellation(clock: self, id: timer.id)
        }
    }

    /// Moves time forward by `interval` seconds (0 fires what is due now), firing every timer that
    /// falls due, in order.
    public func advance(by interval: TimeInterval) {
        let target = lock.withLock { state.now + max(0, interval) }
        while let timer = nextTimer(dueBy: target) {
            timer.action()
        }
        lock.withLock { state.now = max(state.now, target) }
    }

    /// Fires every timer, however far away, moving time to the last one's due time.
    public func runUntilIdle(limit: Int = 100_000) {
        var fired = 0
        while fired < limit, let due = nextDueTime {
            advance(by: due - now)
            fired += 1
        }
    }

    private func nextTimer(dueBy target: TimeInterval) -> Timer? {
        lock.withLock {
            guard let first = state.timers.first, first.dueTime <= target else { return nil }
            state.timers.removeFirst()
            state.now = max(state.now, first.dueTime)
            return first
        }
    }

    fileprivate func cancelTimer(id: Int) {
        lock.withLock { state.timers.removeAll { $0.id == id } }
    }

    private struct Cancellation: APICancellable {
        weak var clock: TestClock?
        let id: Int
        func cancel() { clock?.cancelTimer(id: id) }
    }
}
