import Foundation

/// The time seam: what the engine asks when it needs the time or a timer. Production code uses
/// ``DispatchClock``; tests use `TestClock` from APIManagerKitTesting and advance it by hand.
public protocol APIClock: Sendable {
    /// A monotonic reading in seconds; only differences between readings mean anything.
    var now: TimeInterval { get }
    /// The wall-clock date, for HTTP dates such as `Retry-After`.
    var date: Date { get }
    /// Runs `action` once, `delay` seconds from now (at once for a delay of zero or less), on a
    /// thread of the clock's choosing, unless the returned handle is cancelled first.
    func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> any APICancellable
}

/// Something in progress that can be stopped: a transport request, a timer.
public protocol APICancellable: Sendable {
    /// Stops the work if it has not finished; calling it again, or after the work finished, does nothing.
    func cancel()
}
