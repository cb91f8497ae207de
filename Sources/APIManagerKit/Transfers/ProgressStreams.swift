import Foundation

/// The progress sequences handed out by ``AnyAPITask/progress``: fed by the machine's actions
/// (``StreamFeed``), each report in the order the machine numbered it, and finished after the
/// last report the machine took before the task ended.
///
/// The engine performs a transition's actions after it unlocks, on the thread that made the
/// transition, so two reports (or a report and the end) may arrive here in the other order: a report
/// that comes early waits for the ones before it, and an end that comes early waits for the reports
/// it counts. The continuations are yielded to inside this lock, so that two threads never interleave
/// them (an `AsyncStream` continuation runs no user code).
final class ProgressStreams: Sendable {
    private struct State {
        var continuations: [AsyncStream<APITransferProgress>.Continuation] = []
        var ended = false
        var latest: APITransferProgress?
        /// The number of the next report to hand on (the machine numbers them from 1).
        var next: UInt32 = 1
        /// Reports that arrived before one numbered lower; nearly always empty.
        var early: [UInt32: APITransferProgress] = [:]
        /// The end, once it arrived: the number of reports that come before it.
        var endsAfter: UInt32?
    }

    private let state = LockedState(State())

    /// The last report handed on; `nil` before the first.
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

    /// The machine's report `number`.
    func receive(_ progress: APITransferProgress, number: UInt32) {
        state.withLock { state in
            guard !state.ended, number >= state.next else { return }
            guard number == state.next else {
                state.early[number] = progress
                return
            }
            Self.handOn(progress, in: &state)
            while let waiting = state.early.removeValue(forKey: state.next) { Self.handOn(waiting, in: &state) }
            Self.endIfDue(&state)
        }
    }

    /// The task ended after `count` reports.
    func end(afterReports count: UInt32) {
        state.withLock { state in
            guard !state.ended else { return }
            state.endsAfter = count
            Self.endIfDue(&state)
        }
    }

    private static func handOn(_ progress: APITransferProgress, in state: inout State) {
        state.latest = progress
        state.next &+= 1
        for continuation in state.continuations { continuation.yield(progress) }
    }

    private static func endIfDue(_ state: inout State) {
        guard let count = state.endsAfter, state.next &- 1 == count else { return }
        state.ended = true
        state.early = [:]
        for continuation in state.continuations { continuation.finish() }
        state.continuations = []
    }
}

extension TaskBag {
    /// Feeds the task's own streams (``SchedulingMachine/Action/feedStreams(_:_:)``): its progress
    /// sequences, and at the end its body stream (``APIManager/bytes(for:)``), with the task's error
    /// or the body's end. Performed by the engine after the transition that decided it.
    func feed(_ feed: StreamFeed) {
        switch feed {
        case .progress(let progress, let number):
            progressStreams?.receive(progress, number: number)
        case .end(let failure, let reports):
            progressStreams?.end(afterReports: reports)
            bodyStream?.finish(failure.map { .failure($0) } ?? .success(()))
        }
    }
}
