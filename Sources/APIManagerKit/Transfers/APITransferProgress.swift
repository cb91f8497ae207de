import Foundation

/// How far an attempt's upload or download has gone (see ``APIRequest/reportsProgress``).
///
/// Reported to the delegate (``APIManagerDelegate/apiManager(_:task:didReport:)``) and on the task's
/// ``AnyAPITask/progress`` sequence, for tasks that ask for it. Within an attempt each direction's
/// ``completedBytes`` only grows; a retry starts again from 0 with its own ``attempt`` number. Events
/// are thinned to at most one per 1 % or per 50 ms, whichever is rarer, and each direction ends with
/// exactly one event where ``isComplete`` is `true`, before the task's terminal event.
public struct APITransferProgress: Sendable, Hashable, CustomStringConvertible {
    /// Which way the bytes go.
    public enum Direction: String, Sendable, Hashable {
        /// The request's body, to the server.
        case upload
        /// The response's body, from the server.
        case download
    }

    /// Which way the bytes go.
    public let direction: Direction
    /// The attempt they belong to (1 for the first).
    public let attempt: Int
    /// The bytes sent or received so far in this attempt.
    public let completedBytes: Int64
    /// The bytes expected in all, when known (a `Content-Length`, a file's size); `nil` otherwise.
    public let expectedBytes: Int64?
    /// Whether this direction is done in this attempt: its last event.
    public let isComplete: Bool

    /// A progress report.
    public init(direction: Direction, attempt: Int, completedBytes: Int64, expectedBytes: Int64?, isComplete: Bool) {
        self.direction = direction
        self.attempt = attempt
        self.completedBytes = completedBytes
        self.expectedBytes = expectedBytes
        self.isComplete = isComplete
    }

    /// `completedBytes / expectedBytes` between 0 and 1; 1 when complete; `nil` when the total is
    /// not known before the end.
    public var fraction: Double? {
        if isComplete { return 1 }
        guard let expectedBytes, expectedBytes > 0 else { return nil }
        return min(1, max(0, Double(completedBytes) / Double(expectedBytes)))
    }

    public var description: String {
        let total = expectedBytes.map { "/\($0)" } ?? ""
        return "\(direction) #\(attempt) \(completedBytes)\(total)\(isComplete ? " done" : "")"
    }
}

extension APITransferProgress {
    /// What a transport reports of a transfer as it happens: bytes sent and received so far, with the
    /// totals expected when known. A transport calls it from any thread, with growing counts; the engine
    /// thins the reports and ends each direction itself when the attempt completes, so a transport that
    /// reports nothing still gives a task its final event.
    public typealias Reporter =
        @Sendable (
            _ direction: APITransferProgress.Direction, _ completedBytes: Int64,
            _ expectedBytes: Int64?
        ) -> Void
}

/// Thins an attempt's progress reports (at most one per 1 % or per 50 ms, whichever is rarer) and
/// keeps them monotonic; decides the final report of each direction.
struct ProgressThinner {
    private struct Last {
        var bytes: Int64 = -1
        var expected: Int64?
        var at: TimeInterval = -.infinity
        var complete = false
    }

    private var upload = Last()
    private var download = Last()

    /// The report to pass on for `bytes` of `expected` at `now`, or `nil` to drop it.
    mutating func report(
        _ direction: APITransferProgress.Direction, bytes: Int64, expected: Int64?, now: TimeInterval, attempt: Int
    ) -> APITransferProgress? {
        var last = direction == .upload ? upload : download
        defer { if direction == .upload { upload = last } else { download = last } }
        guard !last.complete, bytes > last.bytes else { return nil }
        let total = expected ?? last.expected
        // A report that reaches the announced total is the direction's last.
        if let total, total > 0, bytes >= total {
            last = Last(bytes: bytes, expected: total, at: now, complete: true)
            return APITransferProgress(
                direction: direction, attempt: attempt, completedBytes: bytes, expectedBytes: total, isComplete: true)
        }
        let enoughTime = now - last.at >= 0.05
        let enoughBytes: Bool
        if let total, total > 0, last.bytes >= 0 {
            enoughBytes = Double(bytes - last.bytes) / Double(total) >= 0.01
        } else {
            enoughBytes = true
        }
        guard enoughTime && enoughBytes else { return nil }
        last = Last(bytes: bytes, expected: total, at: now)
        return APITransferProgress(
            direction: direction, attempt: attempt, completedBytes: bytes, expectedBytes: total, isComplete: false)
    }

    /// The final report of `direction`, unless one was made: `bytes` sent or received in all.
    mutating func finish(_ direction: APITransferProgress.Direction, bytes: Int64, attempt: Int) -> APITransferProgress?
    {
        var last = direction == .upload ? upload : download
        defer { if direction == .upload { upload = last } else { download = last } }
        guard !last.complete else { return nil }
        let total = max(bytes, last.bytes, 0)
        last = Last(bytes: total, expected: total, at: last.at, complete: true)
        return APITransferProgress(
            direction: direction, attempt: attempt, completedBytes: total, expectedBytes: total, isComplete: true)
    }
}
