import Dispatch

/// Where an engine does an attempt's work: building the `URLRequest` (encoding its body, applying
/// persisted headers), the cache lookup (disk included), and building the typed response from what
/// the transport returned.
///
/// `send(_:)` itself only takes the policy decision and returns, whatever the mode.
public enum APIExecution: Sendable {
    /// On a concurrent Dispatch queue: never on the thread that sends, and never on the transport's
    /// callback queue, so responses of different tasks are built in parallel. The work inherits the
    /// quality of service of the thread that caused it (the sender, or the transport's callback).
    case queue(DispatchQueue)
    /// On the thread that causes the work: the sender's for the first attempt, the transport's
    /// callback thread for the response, the clock's for a retry. With `MockTransport` and
    /// `TestClock` everything then happens inside `send(_:)` and `advance(by:)`, so a test stays
    /// synchronous and deterministic: `APIEngine(transport: mock, clock: clock, delivery: .immediate,
    /// execution: .inline)`.
    case inline

    /// A new concurrent queue of the engine's own: the default.
    public static func concurrent(label: String = "APIManagerKit.APIEngine.work") -> APIExecution {
        .queue(DispatchQueue(label: label, attributes: .concurrent))
    }
}
