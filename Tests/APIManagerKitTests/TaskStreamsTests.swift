// A task's own streams (its progress sequences, the body stream of `bytes(for:)`) are fed by the
// machine's actions and end with the machine's `end` (issue 42, item 2): event by event on the
// machine alone, the progress sequences' order against reports performed out of order (a randomized
// driver, on one thread and on many), and on an engine whose delivery queue is held or which is
// released.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

private func report(_ bytes: Int64, attempt: Int = 1) -> APITransferProgress {
    APITransferProgress(
        direction: .download, attempt: attempt, completedBytes: bytes, expectedBytes: 100, isComplete: bytes == 100)
}

private func streamingTask(
    _ identifier: UInt64, progress: Bool, body: StreamBuffer? = nil, scope: String? = nil,
    policy: APIConcurrencyPolicy = .default
) -> AnyAPITask {
    AnyAPITask(
        identifier: identifier,
        settings: .init(
            policy: policy, scope: scope,
            extras: TaskBag.Extras.make(
                totalTimeout: nil, idempotencyHeader: nil, credentialOrigins: nil, reportsProgress: progress,
                download: nil, bodyStream: body, addedHeaders: nil)),
        engine: nil)
}

@Suite("A task's own streams: fed by the machine, ended by its end", .timeLimit(.minutes(1)))
struct TaskStreamsMachineTests {
    @Test(arguments: [nil, "uploads"] as [String?])
    func reportsAreNumberedInTheMachinesOrderAndTheEndCountsThem(scope: String?) {
        var h = MachineHarness()
        let task = streamingTask(1, progress: true, scope: scope)
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        #expect(
            Array(h.run { $0.progressReported(task, attempt: 1, progress: report(10)) }) == [
                .feedStreams(task, .progress(report(10), number: 1))
            ])
        #expect(
            Array(h.run { $0.progressReported(task, attempt: 1, progress: report(20)) }) == [
                .feedStreams(task, .progress(report(20), number: 2))
            ])
        #expect(
            Array(h.run { $0.cancel(task, reason: .explicit) }).contains(
                .feedStreams(task, .end(failure: .cancelled(reason: .explicit), afterReports: 2))))
        h.deliver()
        #expect(
            h.events(of: task) == [
                "started 1", "download #1 10/100", "download #1 20/100", "failed cancelled(explicit)",
            ],
            "the delegate hears them too, in the same order")
    }

    @Test func aFinishedTasksStreamsEndWithoutAnError() {
        var h = MachineHarness()
        let task = streamingTask(1, progress: true, body: StreamBuffer())
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        h.run { $0.progressReported(task, attempt: 1, progress: report(100)) }
        h.finish(task)
        #expect(Array(h.lastActions) == [.feedStreams(task, .end(failure: nil, afterReports: 1))])
    }

    @Test func aBodyStreamAloneEndsWithTheTasksError() {
        var h = MachineHarness()
        let task = streamingTask(1, progress: false, body: StreamBuffer())
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        #expect(
            Array(h.run { $0.progressReported(task, attempt: 1, progress: report(10)) }) == [],
            "no progress sequence to feed")
        let end = Array(h.run { $0.deadlineFired(task, deadline: 5) })
        let failure = APIError.timedOut(deadline: 5, attempts: 1)
        #expect(end.contains(.feedStreams(task, .end(failure: failure, afterReports: 0))), "\(end)")
    }

    @Test func reportsAreNumberedOnAcrossARetry() {
        var h = MachineHarness()
        let task = streamingTask(1, progress: true)
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        h.run { $0.progressReported(task, attempt: 1, progress: report(40)) }
        h.failForRetry(task, delay: 1)
        h.run { $0.retryTimerFired(task, attempt: 1) }
        #expect(
            Array(h.run { $0.progressReported(task, attempt: 2, progress: report(10, attempt: 2)) }) == [
                .feedStreams(task, .progress(report(10, attempt: 2), number: 2))
            ])
        h.finish(task)
        #expect(Array(h.lastActions) == [.feedStreams(task, .end(failure: nil, afterReports: 2))])
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func aTaskCancelledWhileWaitingInLineEndsItsStreamsAfterNoReport(scope: String?) {
        var h = MachineHarness()
        let running = streamingTask(1, progress: true, scope: scope, policy: .waitUntilDone)
        let waiting = streamingTask(2, progress: true, body: StreamBuffer(), scope: scope, policy: .waitUntilDone)
        h.tasks += [running, waiting]
        h.run { $0.send(running, observed: false) }
        h.run { $0.send(waiting, observed: false) }
        #expect(waiting.phase == .waiting)
        #expect(
            Array(h.run { $0.cancel(waiting, reason: .explicit) }) == [
                .feedStreams(waiting, .end(failure: .cancelled(reason: .explicit), afterReports: 0))
            ])
    }

    @Test func aTaskWithoutStreamsIsFedNothing() {
        var h = MachineHarness()
        let task = h.send(.default)
        #expect(Array(h.run { $0.progressReported(task, attempt: 1, progress: report(10)) }) == [])
        h.finish(task)
        #expect(Array(h.lastActions) == [])
    }

    @Test func aReportOfAnAttemptNoLongerCurrentFeedsNothing() {
        var h = MachineHarness()
        let task = streamingTask(1, progress: true)
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        h.failForRetry(task, delay: 1)
        #expect(Array(h.run { $0.progressReported(task, attempt: 1, progress: report(10)) }) == [])
        h.run { $0.cancel(task, reason: .explicit) }
        #expect(Array(h.run { $0.progressReported(task, attempt: 1, progress: report(20)) }) == [])
        #expect(h.lastActions.deliverEvents == false)
    }

    @Test func anEndedTaskIsNotEndedTwice() {
        var h = MachineHarness()
        let task = streamingTask(1, progress: true)
        h.tasks.append(task)
        h.run { $0.send(task, observed: false) }
        h.run { $0.cancel(task, reason: .explicit) }
        #expect(!Array(h.run { $0.cancel(task, reason: .explicit) }).contains { "\($0)".hasPrefix("feedStreams") })
    }

    @Test func releasingTheMachineEndsTheStreamsOfEveryTaskInFlight() {
        var h = MachineHarness()
        let running = streamingTask(1, progress: true)
        let waiting = streamingTask(2, progress: false, body: StreamBuffer(), scope: "line")
        h.tasks += [running, waiting]
        h.run { $0.send(running, observed: false) }
        h.run { $0.send(waiting, observed: false) }
        h.run { $0.progressReported(running, attempt: 1, progress: report(30)) }
        let released = Array(h.run { $0.release() })
        #expect(
            released.contains(
                .feedStreams(running, .end(failure: .cancelled(reason: .managerReleased), afterReports: 1))))
        #expect(
            released.contains(
                .feedStreams(waiting, .end(failure: .cancelled(reason: .managerReleased), afterReports: 0))))
    }
}

@Suite("A task's progress sequences: in the machine's order whatever order they arrive in", .timeLimit(.minutes(1)))
struct ProgressStreamsOrderTests {
    private func collect(_ stream: AsyncStream<APITransferProgress>) async -> [Int64] {
        var seen: [Int64] = []
        for await progress in stream { seen.append(progress.completedBytes) }
        return seen
    }

    @Test func aReportThatComesEarlyWaitsForTheOnesBeforeIt() async {
        let streams = ProgressStreams()
        let stream = streams.makeStream()
        streams.receive(report(20), number: 2)
        #expect(streams.latest == nil, "nothing is handed on before report 1")
        streams.receive(report(10), number: 1)
        #expect(streams.latest == report(20))
        streams.end(afterReports: 2)
        #expect(await collect(stream) == [10, 20])
    }

    @Test func anEndThatComesEarlyWaitsForTheReportsItCounts() async {
        let streams = ProgressStreams()
        let stream = streams.makeStream()
        streams.receive(report(10), number: 1)
        streams.end(afterReports: 3)
        streams.receive(report(30), number: 3)
        streams.receive(report(20), number: 2)
        #expect(await collect(stream) == [10, 20, 30])
        streams.receive(report(40), number: 4)
        #expect(streams.latest == report(30), "nothing after the end")
        #expect(await collect(streams.makeStream()) == [], "a sequence made after the end ends at once")
    }

    @Test func anEndAfterNoReportEndsAtOnce() async {
        let streams = ProgressStreams()
        let stream = streams.makeStream()
        streams.end(afterReports: 0)
        #expect(await collect(stream) == [])
    }

    /// Every order of `count` reports and the end, drawn at random, fed through a task's bag as the
    /// engine feeds it (one after another, or from several threads at once): the sequence gets
    /// reports 1 to `count` in order, then ends; nothing is handed on twice, nothing after the end.
    @Test(arguments: [false, true])
    func aRandomizedDriverDeliversEveryReportOnceInOrderThenTheEnd(fromManyThreads: Bool) async {
        var generator = SplitMix64(state: fromManyThreads ? 42 : 7)
        for round in 0..<300 {
            let count = Int.random(in: 0...12, using: &generator)
            var feeds: [StreamFeed] = (0..<count).map { .progress(report(Int64($0 + 1)), number: UInt32($0 + 1)) }
            feeds.append(.end(failure: nil, afterReports: UInt32(count)))
            feeds.shuffle(using: &generator)
            let bag = TaskBag(
                settings: .init(
                    policy: .default,
                    extras: TaskBag.Extras.make(
                        totalTimeout: nil, idempotencyHeader: nil, credentialOrigins: nil, reportsProgress: true,
                        download: nil, bodyStream: nil, addedHeaders: nil)),
                recordKeeper: LockedState(APIEngine.State(machine: SchedulingMachine(), delivery: .inline)))
            guard let streams = bag.progressStreams else {
                Issue.record("a bag that reports progress has its sequences")
                return
            }
            let stream = streams.makeStream()
            if fromManyThreads {
                let shuffled = feeds
                DispatchQueue.concurrentPerform(iterations: shuffled.count) { bag.feed(shuffled[$0]) }
            } else {
                for feed in feeds { bag.feed(feed) }
            }
            #expect(await collect(stream) == (0..<count).map { Int64($0 + 1) }, "round \(round): \(feeds)")
            #expect(streams.latest?.completedBytes == (count == 0 ? nil : Int64(count)))
        }
    }
}

@Suite("A task's own streams on an engine: they end with the task, not with its delivery", .timeLimit(.minutes(1)))
struct TaskStreamsEngineTests {
    struct FileRequest: APIRequest {
        var url = testBaseURL
        var path = "/file"
        var reportsProgress = true
        var concurrencyScope: String?
    }

    final class Files: APIManager {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private static let body = Data(repeating: 1, count: 400)

    @Test(arguments: [nil, "files"] as [String?])
    func theProgressSequenceEndsWhileTheDeliveryQueueIsHeld(scope: String?) async {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/file", replies: [.status(200, body: Self.body).after(0.1).inChunks(4, every: 0.1)])
        let delivery = DispatchQueue(label: "held delivery")
        delivery.suspend()
        let files = Files(
            engine: APIEngine(transport: mock, clock: clock, delivery: .queue(delivery), execution: .inline))
        let recorder = EventRecorder()
        files.delegate = recorder
        let task = files.send(FileRequest(concurrencyScope: scope))
        let reports = task.progress
        clock.advance(by: 1)
        #expect(task.state == .finished)
        var seen: [Int64] = []
        for await progress in reports { seen.append(progress.completedBytes) }
        #expect(seen == [100, 200, 300, 400], "every report, then the end, with the delegate not yet told")
        #expect(recorder.events(of: task).isEmpty)
        delivery.resume()
        await withCheckedContinuation { done in delivery.async { done.resume() } }
        #expect(recorder.events(of: task).last == "finished", "the delegate is told once the queue runs")
    }

    @Test func theBodyStreamEndsWhileTheDeliveryQueueIsHeld() async throws {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/file", replies: [.status(200, body: Self.body).inChunks(2, every: 0.1)])
        let delivery = DispatchQueue(label: "held delivery")
        delivery.suspend()
        defer { delivery.resume() }
        let files = Files(
            engine: APIEngine(transport: mock, clock: clock, delivery: .queue(delivery), execution: .inline))
        let stream = files.bytes(for: FileRequest(reportsProgress: false))
        clock.advance(by: 1)
        var received = Data()
        for try await chunk in stream { received.append(chunk) }
        #expect(received == Self.body)
    }

    @Test func theProgressSequenceOfATaskWhoseEngineIsReleasedEnds() async {
        let clock = TestClock()
        var reports: AsyncStream<APITransferProgress>?
        weak var released: APIEngine?
        do {
            let mock = MockTransport(clock: clock)
            mock.stub(nil, "/file", replies: [.status(200, body: Self.body).after(0.5).inChunks(4, every: 1)])
            let files = Files(engine: APIEngine(transport: mock, clock: clock, delivery: .inline, execution: .inline))
            released = files.engine
            let task = files.send(FileRequest())
            reports = task.progress
            clock.advance(by: 1)
            #expect(task.state == .running)
        }
        #expect(released == nil, "the engine went with its manager")
        var seen: [Int64] = []
        if let reports { for await progress in reports { seen.append(progress.completedBytes) } }
        #expect(seen == [100], "the report before, then the end (before, the sequence never ended)")
    }

    /// Sent from one thread, its reports made on another (the transport's, here the clock's), its
    /// events delivered on a third: the sequence gets every report in order, then ends.
    @Test func reportsFromAnotherThreadReachTheSequenceInOrder() async {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/file", replies: [.status(200, body: Data(count: 4000)).after(0.1).inChunks(40, every: 0.1)])
        let files = Files(
            engine: APIEngine(
                transport: mock, clock: clock, delivery: .queue(DispatchQueue(label: "d")), execution: .inline))
        let task = await Task.detached { files.send(FileRequest()) }.value
        let reports = task.progress
        await Task.detached { clock.advance(by: 10) }.value
        var seen: [Int64] = []
        for await progress in reports { seen.append(progress.completedBytes) }
        #expect(seen.count > 1 && seen == seen.sorted() && seen.last == 4000, "\(seen)")
    }
}
