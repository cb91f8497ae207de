/// The pacing of ``APIConcurrencyPolicy/throttle``: per scope key, when the next throttled task may
/// start, on the engine's clock. A turn outlives its scope's last task (a throttle outlives it), and
/// passed turns are pruned. Part of the machine's state; guarded by the engine's lock.
struct ThrottleTurns {
    /// A scope key as a dictionary key (`nil` is a scope of its own).
    private struct Key: Hashable {
        let scope: String?
    }

    private var turns: [Key: Double] = [:]
    /// The number of turns past which passed ones are pruned: twice the live ones at the last
    /// pruning, so that pruning costs O(1) per throttled send however many scopes are throttled.
    private var pruningAt = 16

    /// The turns kept.
    var count: Int { turns.count }

    /// Takes the next turn of `scope` for a task sent `now`: the time it may start (`now` when its
    /// turn has come), the turn after it set `interval` later; `nil` when its turn has not come and
    /// it does not wait (nothing is taken).
    mutating func take(for scope: String?, now: Double, interval: Double, waits: Bool) -> Double? {
        if turns.count >= pruningAt {
            // Passed turns are forgotten (a passed turn and none mean the same: start now).
            turns = turns.filter { $0.value > now }
            pruningAt = max(16, turns.count * 2)
        }
        let key = Key(scope: scope)
        let turn = max(now, turns[key] ?? now)
        if turn <= now {
            turns[key] = now + interval
            return now
        }
        guard waits else { return nil }
        turns[key] = turn + interval
        return turn
    }

    /// A throttled task ended while it waited for its `turn` (cancelled, or past its deadline or
    /// wait limit): when no later task took the turn after it, the next one sent gets its turn
    /// instead of waiting behind a task that never ran. A turn with later ones after it stays taken:
    /// their timers are set, so the gap is not closed.
    mutating func giveBack(_ turn: Double, for scope: String?, interval: Double) {
        let key = Key(scope: scope)
        if turns[key] == turn + interval { turns[key] = turn }
    }
}
