import Dispatch
import Foundation

/// The default clock: `DispatchTime` for readings, a `DispatchSourceTimer` per timer.
///
/// Cancelling a timer releases its action at once: a cancelled timer keeps nothing alive until its
/// due time (a `DispatchWorkItem` given to `asyncAfter` would keep its closure until then).
public struct DispatchClock: APIClock {
    private let queue: DispatchQueue

    /// - Parameter queue: where timers fire. A global queue unless given.
    public init(queue: DispatchQueue = .global()) {
        self.queue = queue
    }

    public var now: TimeInterval {
        TimeInterval(DispatchTime.now().uptimeNanoseconds) / 1_000_000_000
    }

    public var date: Date { Date() }

    /// Delays from this one on (a year) never fire: they are scheduled for the distant future.
    static let longestDelay: TimeInterval = 365 * 24 * 3600

    public func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> any APICancellable {
        let source = DispatchSource.makeTimerSource(queue: queue)
        // The handler holds the source, so an armed timer fires even if its handle is dropped; the
        // cycle ends when the source is cancelled (as it fires, or by the handle), which releases
        // the handler and, with it, the action.
        source.setEventHandler {
            guard !source.isCancelled else { return }
            source.cancel()
            action()
        }
        let deadline: DispatchTime
        if !(delay > 0) {
            deadline = .now()
        } else if delay < Self.longestDelay {
            deadline = .now() + .nanoseconds(Int(delay * 1_000_000_000))
        } else {
            deadline = .distantFuture
        }
        source.schedule(deadline: deadline, repeating: .never)
        source.resume()
        return DispatchSourceCancellable(source: source)
    }
}

private final class DispatchSourceCancellable: APICancellable, @unchecked Sendable {
    // @unchecked: `source` is a `let`; DispatchSource's `cancel()` is thread-safe and idempotent.
    private let source: any DispatchSourceTimer

    init(source: any DispatchSourceTimer) { self.source = source }

    func cancel() { source.cancel() }
}
