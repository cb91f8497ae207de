import Foundation

extension APIEngine {
    /// Fails fast during an outage: after ``failureThreshold`` consecutive transient failures of one
    /// origin, the circuit opens and new attempts to that origin fail at once with
    /// ``APIError/circuitOpen(origin:closesIn:)``, without being sent, for ``openInterval`` seconds;
    /// then one attempt is let through as a probe, whose outcome closes the circuit or opens it again.
    ///
    /// Transient failures are those ``APIRetryPolicy`` retries by default (connection failures,
    /// timeouts, `408`, `429`, `5xx`); any other answer closes a half-open circuit and resets the count.
    /// A cancelled attempt is no answer: the count stays, and a cancelled probe lets the next attempt
    /// through as the probe. One network attempt counts once, however many senders share it
    /// (``APIConcurrencyPolicy/Sharing``).
    /// Off unless given to ``APIEngine/init(transport:clock:randomSource:delivery:execution:cache:persistedHeaders:interceptors:authentication:defaultHeaders:cookies:circuitBreaker:retryBudget:)``;
    /// one breaker per engine and origin (scheme, host and port), timed by the engine's clock.
    public struct CircuitBreaker: Sendable, Hashable {
        /// Consecutive transient failures of an origin that open its circuit. `5` unless given; values
        /// under `1` count as `1`.
        public var failureThreshold: Int
        /// How long an open circuit refuses attempts before it lets a probe through, in seconds. `30`
        /// unless given; a negative value or one that is not a finite number counts as `0`.
        public var openInterval: TimeInterval

        /// - Parameters:
        ///   - failureThreshold: consecutive transient failures that open the circuit.
        ///   - openInterval: seconds the circuit stays open before a probe.
        public init(failureThreshold: Int = 5, openInterval: TimeInterval = 30) {
            self.failureThreshold = max(1, failureThreshold)
            self.openInterval = openInterval.isFinite ? max(0, openInterval) : 0
        }
    }
}

extension APIEngine {
    /// Stops retry storms: retries to one origin may be at most ``ratio`` of the requests sent to it
    /// over the last ``window`` seconds, with ``minimumRetries`` always allowed. A retry the budget
    /// refuses does not happen: the task ends with the error of its last attempt. A retry that several
    /// senders share (``APIConcurrencyPolicy/Sharing``) is one retry: the budget decides it once and counts it once.
    ///
    /// Off unless given to the engine; one budget per engine and origin, timed by the engine's clock.
    public struct RetryBudget: Sendable, Hashable {
        /// The most retries as a fraction of the requests in the window. `0.2` unless given; clamped to
        /// `0...` (a value that is not a finite number counts as `0`).
        public var ratio: Double
        /// Retries allowed in any window whatever the ratio says. `10` unless given; at least `0`.
        public var minimumRetries: Int
        /// The sliding window, in seconds. `10` unless given; a value that is not a finite positive number
        /// counts as `1`.
        public var window: TimeInterval

        /// - Parameters:
        ///   - ratio: the most retries per request sent, over the window.
        ///   - minimumRetries: retries always allowed per window.
        ///   - window: the window's length, in seconds.
        public init(ratio: Double = 0.2, minimumRetries: Int = 10, window: TimeInterval = 10) {
            self.ratio = ratio.isFinite ? max(0, ratio) : 0
            self.minimumRetries = max(0, minimumRetries)
            self.window = window.isFinite && window > 0 ? window : 1
        }
    }
}
