extension AnyAPITask {
    /// The lifecycle of a task as seen from outside.
    ///
    /// States compare equal with `==`, so a test writes
    /// `#expect(task.state == .failed(.cancelled(reason: .policy)))`: two failures are equal when
    /// their errors say the same (``APIError/description``: the case and what it carries, such as
    /// the cancellation's reason, the status and the server's message, or the limit that was met).
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Queued behind other tasks of its scope (``APIConcurrencyPolicy/waitUntilDone`` and
        /// ``APIConcurrencyPolicy/waitUntilDoneHighPriority``), or not yet handed to the engine.
        case waiting
        /// An attempt is on the wire.
        case running
        /// An attempt failed and the next one is scheduled.
        case waitingForRetry
        /// Ended with a response.
        case finished
        /// Ended without a response: cancelled, ignored, timed out or failed.
        case failed(APIError)

        /// Equal when both are the same case, two failures when their errors say the same (see ``State``).
        public static func == (lhs: State, rhs: State) -> Bool {
            switch (lhs, rhs) {
            case (.waiting, .waiting), (.running, .running), (.waitingForRetry, .waitingForRetry),
                (.finished, .finished):
                return true
            case (.failed(let left), .failed(let right)):
                return left.description == right.description
            case (.waiting, _), (.running, _), (.waitingForRetry, _), (.finished, _), (.failed, _):
                return false
            }
        }

        /// Whether the task has ended and will never change again.
        public var isTerminal: Bool {
            switch self {
            case .finished, .failed: return true
            case .waiting, .running, .waitingForRetry: return false
            }
        }

        public var description: String {
            switch self {
            case .waiting: return "waiting"
            case .running: return "running"
            case .waitingForRetry: return "waitingForRetry"
            case .finished: return "finished"
            case .failed(let error): return "failed(\(error))"
            }
        }
    }
}
