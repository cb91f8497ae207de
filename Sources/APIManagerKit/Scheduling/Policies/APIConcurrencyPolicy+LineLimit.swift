import Foundation

extension APIConcurrencyPolicy {
    /// How long a task may wait in its scope's line (see ``APIRequest/lineLimit``). Past either limit
    /// the task ends, and nothing is sent for it.
    ///
    /// ```swift
    /// var lineLimit: APIConcurrencyPolicy.LineLimit? { APIConcurrencyPolicy.LineLimit(maxLength: 10, maxWait: 5) }
    /// ```
    public struct LineLimit: Sendable, Hashable {
        /// The most tasks that may already be waiting in the scope's line when this task would join
        /// it; past it the task ends at once with ``APIError/lineFull(maxLength:)``. A negative value
        /// counts as `0` (the task never waits). `nil` (no limit) unless given.
        public var maxLength: Int?
        /// The longest the task may wait in the line, in seconds of the engine's clock; past it the task
        /// leaves the line and ends with ``APIError/waitedTooLong(maxWait:)``. A ``APIConcurrencyPolicy/debounce``
        /// or ``APIConcurrencyPolicy/throttle`` task's wait for its turn (outside the line) counts too. A
        /// negative value counts as `0`; a value that is not a finite number means no limit. `nil` (no
        /// limit) unless given.
        public var maxWait: TimeInterval?

        /// - Parameters:
        ///   - maxLength: the most tasks that may wait ahead; `nil` for no limit.
        ///   - maxWait: the longest wait, in seconds; `nil` for no limit.
        public init(maxLength: Int? = nil, maxWait: TimeInterval? = nil) {
            self.maxLength = maxLength
            self.maxWait = maxWait
        }

        /// The length limit as the scheduler applies it.
        var effectiveMaxLength: Int? { maxLength.map { max(0, $0) } }

        /// The wait limit as the scheduler applies it; `nil` when there is none.
        var effectiveMaxWait: TimeInterval? {
            guard let maxWait, maxWait.isFinite else { return nil }
            return max(0, maxWait)
        }
    }
}
