import Foundation

/// One attempt's progress: the transport's reports, thinned, on their way to the task's events.
final class ProgressChannel: Sendable {
    private let thinner = LockedState(ProgressThinner())
    private let task: AnyAPITask
    private let attempt: Int
    /// The request body's size: the upload's total.
    let uploadBytes: Int64?
    /// The attempt's download file: a resumed download counts the part already on disk, so its
    /// progress goes on from there instead of starting at 0.
    private let download: APIResponseBodyFile?
    private weak let engine: APIEngine?

    init(engine: APIEngine, task: AnyAPITask, attempt: Int, uploadBytes: Int64?, download: APIResponseBodyFile?) {
        self.engine = engine
        self.task = task
        self.attempt = attempt
        self.uploadBytes = uploadBytes
        self.download = download
    }

    /// What the transport calls (any thread).
    func report(_ direction: APITransferProgress.Direction, bytes: Int64, expected: Int64?) {
        guard let engine else { return }
        let now = engine.clock.now
        var bytes = bytes
        var expected = direction == .upload ? expected ?? uploadBytes : expected
        if direction == .download, let offset = download?.appendedFrom, offset > 0 {
            bytes += offset
            expected = expected.map { $0 + offset }
        }
        let progress = thinner.withLock {
            $0.report(direction, bytes: bytes, expected: expected, now: now, attempt: attempt)
        }
        if let progress { engine.progressReported(task, attempt: attempt, progress: progress) }
    }

    /// The transport answered: each direction gets its final report (the upload's whole body, the
    /// download's received bytes), unless the transport made it.
    func finish(downloaded: Int64) {
        guard let engine else { return }
        let downloaded = downloaded + (download?.appendedFrom ?? 0)
        let reports = thinner.withLock { thinner in
            [
                uploadBytes.flatMap { thinner.finish(.upload, bytes: $0, attempt: attempt) },
                thinner.finish(.download, bytes: downloaded, attempt: attempt),
            ].compactMap { $0 }
        }
        for progress in reports { engine.progressReported(task, attempt: attempt, progress: progress) }
    }
}
