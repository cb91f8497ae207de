import Dispatch
import Foundation

/// The default clock: `DispatchTime` for readings, `DispatchQueue.asyncAfter` for timers.
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
        let item = DispatchWorkItem(block: action)
        if !(delay > 0) {
            queue.async(execute: item)
        } else if delay < Self.longestDelay {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay * 1_000_000_000)), execute: item)
        } else {
            queue.asyncAfter(deadline: .distantFuture, execute: item)
        }
        return DispatchWorkItemCancellable(item: item)
    }
}

private struct DispatchWorkItemCancellable: APICancellable, @unchecked Sendable {
    // @unchecked: DispatchWorkItem.cancel() is thread-safe; the item is never mutated otherwise.
    let item: DispatchWorkItem
    func cancel() { item.cancel() }
}
