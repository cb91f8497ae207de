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
        let deadline: DispatchTime
        if !(delay > 0) {
            deadline = .now()
        } else if delay < Self.longestDelay {
            deadline = .now() + .nanoseconds(Int(delay * 1_000_000_000))
        } else {
            deadline = .distantFuture
        }
        return DispatchClockTimer(queue: queue, deadline: deadline, action: action)
    }
}

/// One timer: a one-shot dispatch source and the action, which `cancel()` lets go of at once.
private final class DispatchClockTimer: APICancellable, @unchecked Sendable {
    // @unchecked: `action` is read and written only while holding `lock`; `source` is a `let`, and
    // DispatchSource's `cancel()` is thread-safe and idempotent.
    private let lock = Lock()
    private var action: (@Sendable () -> Void)?
    private let source: any DispatchSourceTimer

    init(queue: DispatchQueue, deadline: DispatchTime, action: @escaping @Sendable () -> Void) {
        self.action = action
        source = DispatchSource.makeTimerSource(queue: queue)
        // The handler holds the timer, so an armed timer fires even if its handle is dropped; the
        // cycle ends when the source is cancelled (as it fires, or by the handle).
        source.setEventHandler { [self] in fire() }
        source.schedule(deadline: deadline, repeating: .never)
        source.resume()
    }

    private func fire() {
        let action = lock.withLock {
            defer { self.action = nil }
            return self.action
        }
        source.cancel()
        action?()
    }

    func cancel() {
        let action = lock.withLock {
            defer { self.action = nil }
            return self.action
        }
        source.cancel()
        // Released here, outside the lock, at once: dispatch frees the source's handler later.
        _ = action
    }
}
