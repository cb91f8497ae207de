import Foundation

/// The progress sequences handed out by ``AnyAPITask/progress``: fed as the reports are delivered,
/// finished when the task's terminal event is.
final class ProgressStreams: Sendable {
    private struct State {
        var continuations: [AsyncStream<APITransferProgress>.Continuation] = []
        var ended = false
        var latest: APITransferProgress?
    }

    private let state = LockedState(State())

    /// The last report delivered; `nil` before the first.
    var latest: APITransferProgress? { state.withLock { $0.latest } }

    func makeStream() -> AsyncStream<APITransferProgress> {
        let (stream, continuation) = AsyncStream.makeStream(of: APITransferProgress.self)
        let ended = state.withLock { state -> Bool in
            if !state.ended { state.continuations.append(continuation) }
            return state.ended
        }
        if ended { continuation.finish() }
        return stream
    }

    func yield(_ progress: APITransferProgress) {
        let continuations = state.withLock { state in
            state.latest = progress
            return state.continuations
        }
        for continuation in continuations { continuation.yield(progress) }
    }

    func finish() {
        let continuations = state.withLock { state in
            state.ended = true
            defer { state.continuations = [] }
            return state.continuations
        }
        for continuation in continuations { continuation.finish() }
    }
}
