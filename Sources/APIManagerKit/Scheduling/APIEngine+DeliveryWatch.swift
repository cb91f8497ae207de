import Dispatch
import Foundation

extension APIEngine {
    /// How long delegate events wait on a delivery queue that takes none of them before the engine
    /// says so (``Notice/Kind/deliveryStalled``): 5 seconds.
    static let deliveryStallInterval: TimeInterval = 5

    /// A delivery run to schedule, after a transition queued events: where, and whether the watch
    /// over the delivery queue is to be set with it.
    struct DeliveryRun {
        let delivery: APIEngine.Delivery
        let setsWatch: Bool
    }

    /// Whether events wait on a delivery queue that never runs them (the main queue of a command-line
    /// tool that runs no main loop): when a run is scheduled on a queue, a timer of the engine's clock
    /// looks again after ``deliveryStallInterval``; if a run is still scheduled and no run took
    /// events meanwhile, the engine says so, once in its life. One timer at a time, and none once it
    /// has spoken. Kept under the engine's lock.
    struct DeliveryWatch {
        private var isSet = false
        private var takesWhenSet: UInt64 = 0
        private var hasSpoken = false

        /// A run is scheduled on a queue; `true` when the watch's timer is to be set now.
        mutating func arm(takes: UInt64) -> Bool {
            guard !isSet, !hasSpoken else { return false }
            isSet = true
            takesWhenSet = takes
            return true
        }

        enum Verdict: Equatable {
            /// Events waited the whole interval and no run took any: say so.
            case stalled
            /// Runs took events, and one is scheduled again: look again later.
            case lookAgain
            /// Nothing waits: the next scheduled run sets the watch again.
            case rest
        }

        /// The timer fired: what the outbox shows now.
        mutating func look(isRunScheduled: Bool, takes: UInt64) -> Verdict {
            guard isSet else { return .rest }
            guard isRunScheduled else {
                isSet = false
                return .rest
            }
            guard takes == takesWhenSet else {
                takesWhenSet = takes
                return .lookAgain
            }
            isSet = false
            hasSpoken = true
            return .stalled
        }
    }

    /// Sets the watch's timer (see ``DeliveryWatch``).
    func watchDelivery(on queue: DispatchQueue) {
        _ = clock.schedule(after: Self.deliveryStallInterval) { [weak self] in self?.deliveryWatchFired(queue) }
    }

    private func deliveryWatchFired(_ queue: DispatchQueue) {
        let verdict = state.withLock { state in
            state.deliveryWatch.look(
                isRunScheduled: state.machine.outbox.isDeliveryScheduled, takes: state.machine.outbox.takes)
        }
        switch verdict {
        case .rest: break
        case .lookAgain: watchDelivery(on: queue)
        case .stalled: tell(.deliveryStalled(on: queue, for: Self.deliveryStallInterval))
        }
    }

    /// Tells the engine's observers a notice about the engine itself (a delivery that stalled, its
    /// session's sign-out), or, when it has none, writes it to standard error (only a stalled
    /// delivery comes here then: a session tells only engines with observers). See
    /// ``tell(_:about:)`` for the circuit's and the budget's.
    func tell(_ notice: Notice) {
        guard !observers.isEmpty else {
            FileHandle.standardError.write(Data("APIManagerKit: \(notice)\n".utf8))
            return
        }
        for observer in observers { observer.notice(notice) }
    }
}
