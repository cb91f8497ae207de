/// The pacing of ``APIConcurrencyPolicy/throttle``, per scope key: when the next throttled task may
/// start, on the engine's clock, and the throttled tasks waiting for their turns, first first. One
/// turn timer per key at a time: it fires at the next turn and starts the first task then waiting,
/// whoever it is, so a waiting task that ends (cancelled, past its deadline or its line limit, or
/// ended by another task's policy) leaves no gap: every waiting throttled task starts within
/// (tasks ahead of it + 1) intervals. A key's turn outlives its scope's last task (a throttle
/// outlives it), and passed turns are pruned. Part of the machine's state; guarded by the engine's
/// lock.
struct ThrottleTurns {
    /// A scope key as a dictionary key (`nil` is a scope of its own).
    private struct Key: Hashable {
        let scope: String?
    }

    /// One key's turns.
    private struct Pace {
        /// When the next throttled task may start.
        var next: Double
        /// The tasks waiting for their turn, first first.
        var waiting: [AnyAPITask] = []
        /// A turn timer is set: it fires at `next`.
        var timerIsSet = false
    }

    private var paces: [Key: Pace] = [:]
    /// The number of keys past which passed ones are pruned: twice the live ones at the last
    /// pruning, so that pruning costs O(1) per throttled send however many scopes are throttled.
    private var pruningAt = 16

    /// The keys kept.
    var count: Int { paces.count }

    /// What a throttled task sent does.
    enum Decision: Equatable {
        /// Its turn has come: it starts.
        case start
        /// It waits for its turn; a turn timer is to be set to fire after this long, unless `nil`
        /// (one is set already).
        case wait(timerAfter: Double?)
        /// Its turn has not come and it does not wait (``APIConcurrencyPolicy/ThrottleMode/ignore``).
        case ignore
    }

    /// A throttled `task` is sent `now`: it starts when no task of its key waits and the key's turn
    /// has come (the next turn then `interval` later), else waits behind the others, or (`waits`
    /// false) is ignored.
    mutating func take(
        _ task: AnyAPITask, for scope: String?, now: Double, interval: Double, waits: Bool
    ) -> Decision {
        if paces.count >= pruningAt {
            // Passed turns with nothing waiting are forgotten (a passed turn and none mean the
            // same: start now).
            paces = paces.filter { $0.value.next > now || !$0.value.waiting.isEmpty || $0.value.timerIsSet }
            pruningAt = max(16, paces.count * 2)
        }
        let key = Key(scope: scope)
        var pace = paces[key] ?? Pace(next: now)
        defer { paces[key] = pace }
        if pace.waiting.isEmpty, pace.next <= now {
            pace.next = now + interval
            return .start
        }
        guard waits else { return .ignore }
        pace.waiting.append(task)
        guard !pace.timerIsSet else { return .wait(timerAfter: nil) }
        pace.timerIsSet = true
        return .wait(timerAfter: max(0, pace.next - now))
    }

    /// A waiting throttled task ended before its turn: the tasks behind it move up.
    mutating func remove(_ task: AnyAPITask, for scope: String?) {
        let key = Key(scope: scope)
        guard let index = paces[key]?.waiting.firstIndex(where: { $0 === task }) else { return }
        paces[key]?.waiting.remove(at: index)
    }

    /// The turn timer of `scope` fired `now`: the first waiting task, if any, starts (the next turn
    /// then its interval later), and a timer is to be set for the next one's turn when more wait.
    mutating func turnCame(for scope: String?, now: Double) -> (start: AnyAPITask?, timerAfter: Double?) {
        let key = Key(scope: scope)
        guard var pace = paces[key] else { return (nil, nil) }
        defer { paces[key] = pace }
        pace.timerIsSet = false
        guard !pace.waiting.isEmpty else { return (nil, nil) }
        let first = pace.waiting.removeFirst()
        pace.next = max(now, pace.next) + first.bag.pacing.throttleInterval
        guard !pace.waiting.isEmpty else { return (first, nil) }
        pace.timerIsSet = true
        return (first, pace.next - now)
    }
}
