// Upload and download progress (issue 21, item 5) on the mock transport and a virtual clock; the
// mock's staged replies (item 8): a body in chunks over time, a cut body, an upload that takes time.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Progress", .timeLimit(.minutes(1)))
struct ProgressTests {
    struct TransferRequest: APIRequest {
        var url = testBaseURL
        var path = "/file"
        var method: HTTPMethod = .get
        var body: APIRequestBody?
        var reportsProgress = true
        var concurrencyScope: String?
        var retryPolicy: APIRetryPolicy?
    }

    final class TransferManager: APIManager {
        typealias Request = TransferRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private func make(
        _ replies: MockTransport.Reply..., transport: (any APITransport)? = nil
    ) -> (TestClock, MockTransport, TransferManager, EventRecorder) {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/file", replies: replies)
        let manager = TransferManager(
            engine: APIEngine(transport: transport ?? mock, clock: clock, delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        manager.delegate = recorder
        return (clock, mock, manager, recorder)
    }

    private static let body = Data(repeating: 7, count: 1000)

    @Test(arguments: [nil, "downloads"] as [String?])
    func aBodyInChunksIsReportedChunkByChunkThenFinished(scope: String?) {
        let (clock, _, manager, recorder) = make(.status(200, body: Self.body).after(0.5).inChunks(4, every: 0.1))
        let task = manager.send(TransferRequest(concurrencyScope: scope))
        clock.advance(by: 0.5)
        #expect(recorder.events(of: task) == ["start 1", "download #1 250/1000"])
        clock.advance(by: 0.3)
        #expect(
            recorder.events(of: task) == [
                "start 1", "download #1 250/1000", "download #1 500/1000", "download #1 750/1000",
                "download #1 1000/1000 done", "finished",
            ])
    }

    @Test func reportsAreThinnedToOnePerFiftyMillisecondsAndOnePercent() {
        let (clock, _, manager, recorder) = make(.status(200, body: Self.body).inChunks(1000, every: 0.001))
        let task = manager.send(TransferRequest())
        clock.advance(by: 2)
        let reports = recorder.events(of: task).filter { $0.hasPrefix("download") }
        // About one per 50 ms over one second, and the final one.
        #expect((18...22).contains(reports.count), "\(reports.count) reports")
        #expect(reports.last == "download #1 1000/1000 done")
        #expect(recorder.events(of: task).last == "finished")
    }

    @Test func anUploadIsReportedAsItGoesThenTheDownloadEnds() {
        let (clock, _, manager, recorder) = make(.status(201).uploading(over: 2, steps: 4).after(1))
        let task = manager.send(
            TransferRequest(method: .post, body: APIRequestBody(data: Data(count: 4000), contentType: "x/y")))
        clock.advance(by: 3)
        #expect(
            recorder.events(of: task) == [
                "start 1", "upload #1 1000/4000", "upload #1 2000/4000", "upload #1 3000/4000",
                "upload #1 4000/4000 done", "download #1 0/0 done", "finished",
            ])
    }

    @Test func aRetryStartsOverVisiblyWithItsAttemptNumber() {
        let (clock, _, manager, recorder) = make(
            .status(200, body: Self.body).inChunks(2, every: 1).cut(after: 600),
            .status(200, body: Self.body).inChunks(2, every: 1))
        let task = manager.send(
            TransferRequest(retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock.advance(by: 10)
        #expect(
            recorder.events(of: task) == [
                "start 1", "download #1 500/1000", "download #1 600/1000", "retry 1.0", "start 2",
                "download #2 500/1000", "download #2 1000/1000 done", "finished",
            ])
    }

    @Test func aCutBodyFailsWithoutAFinalReport() {
        let (clock, _, manager, recorder) = make(.status(200, body: Self.body).inChunks(2, every: 1).cut(after: 500))
        let task = manager.send(TransferRequest())
        clock.advance(by: 5)
        #expect(
            recorder.events(of: task) == [
                "start 1", "download #1 500/1000",
                "failed transport(\(URLError.Code.networkConnectionLost.rawValue))",
            ])
    }

    @Test func aTaskCancelledMidDownloadGetsNoMoreReports() {
        let (clock, mock, manager, recorder) = make(.status(200, body: Self.body).inChunks(4, every: 1))
        let task = manager.send(TransferRequest())
        clock.advance(by: 0.5)
        task.cancel()
        clock.advance(by: 10)
        #expect(recorder.events(of: task) == ["start 1", "download #1 250/1000", "failed cancelled(explicit)"])
        #expect(mock.records.first?.outcome == .cancelled)
    }

    @Test func tasksThatDoNotAskGetNoReports() async {
        let (clock, _, manager, recorder) = make(.status(200, body: Self.body).inChunks(4, every: 0.1))
        let task = manager.send(TransferRequest(reportsProgress: false))
        clock.advance(by: 1)
        #expect(recorder.events(of: task) == ["start 1", "finished"])
        #expect(task.bag.progressStreams == nil)
        var count = 0
        for await _ in task.progress { count += 1 }
        #expect(count == 0, "the sequence ends at once")
    }

    @Test func theTasksSequenceGetsTheReportsAndEndsWithTheTask() async {
        let (clock, _, manager, _) = make(.status(200, body: Self.body).after(0.1).inChunks(2, every: 0.1))
        let task = manager.send(TransferRequest())
        let reports = task.progress
        clock.advance(by: 1)
        var seen: [String] = []
        for await progress in reports { seen.append("\(progress) \(progress.fraction ?? -1)") }
        #expect(seen == ["download #1 500/1000 0.5", "download #1 1000/1000 done 1.0"])
        var late = 0
        for await _ in task.progress { late += 1 }
        #expect(late == 0, "a sequence made after the end ends at once")
    }

    /// A transport that answers whole and reports nothing, as one written before progress existed.
    struct SilentTransport: APITransport {
        func send(_ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void)
            -> any APICancellable
        {
            completion(.success(APIRawResponse(statusCode: 200, body: Data(count: 300))))
            return NothingToCancel()
        }
    }

    @Test func aTransportThatReportsNothingStillGivesEachDirectionItsEnd() {
        let (_, _, manager, recorder) = make(.status(200), transport: SilentTransport())
        let task = manager.send(
            TransferRequest(method: .put, body: APIRequestBody(data: Data(count: 50), contentType: "x/y")))
        #expect(
            recorder.events(of: task) == ["start 1", "upload #1 50/50 done", "download #1 300/300 done", "finished"])
    }

    @Test func reportsFromAnotherThreadArriveInOrderBeforeTheEnd() async {
        let (clock, _, manager, recorder) = make(.status(200, body: Self.body).inChunks(5, every: 1))
        let task = await Task.detached { manager.send(TransferRequest()) }.value
        await Task.detached { clock.advance(by: 10) }.value
        let reports = recorder.events(of: task).filter { $0.hasPrefix("download") }
        #expect(reports.count == 5)
        #expect(recorder.events(of: task).last == "finished")
    }

    @Test func theThinnerKeepsReportsMonotonicAndFinishesOnce() {
        var thinner = ProgressThinner()
        #expect(thinner.report(.download, bytes: 10, expected: nil, now: 0, attempt: 1) != nil)
        #expect(thinner.report(.download, bytes: 5, expected: nil, now: 1, attempt: 1) == nil, "never backwards")
        #expect(thinner.report(.download, bytes: 20, expected: nil, now: 0.01, attempt: 1) == nil, "too soon")
        #expect(thinner.report(.download, bytes: 30, expected: nil, now: 0.07, attempt: 1)?.completedBytes == 30)
        #expect(thinner.finish(.download, bytes: 40, attempt: 1)?.isComplete == true)
        #expect(thinner.finish(.download, bytes: 40, attempt: 1) == nil, "one final report")
        #expect(thinner.report(.download, bytes: 50, expected: nil, now: 9, attempt: 1) == nil, "nothing after it")
    }
}
