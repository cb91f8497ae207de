// Streamed and downloaded tasks keep the rest of the pipeline (issue 21, item 7): the deadline,
// interceptors, the cache (not used unless asked) and one terminal event; on the mock transport and
// a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Streams and downloads in the pipeline", .timeLimit(.minutes(1)))
struct TransferPipelineTests {
    struct TransferRequest: APIRequest {
        var url = testBaseURL
        var path = "/file"
        var download: APIDownload?
        var deadline: TimeInterval?
        var cacheOption: APIResponseCache.Option = .networkOnly
        var concurrencyScope: String?
    }

    final class Transfers: APIManager {
        typealias Request = TransferRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static let body = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    /// The body in 10 parts, one a second from 0 s, with a strong validator.
    static let slow = MockTransport.Reply.status(200, headers: ["ETag": "\"v1\""], body: body).inChunks(10, every: 1)

    let directory = ScratchDirectory()

    private func make(
        _ replies: MockTransport.Reply..., interceptors: [any APIInterceptor] = [], cache: APIResponseCache? = nil
    ) -> (TestClock, MockTransport, Transfers, EventRecorder) {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/file", replies: replies)
        let transfers = Transfers(
            engine: APIEngine(
                transport: mock, clock: clock, delivery: .inline, execution: .inline, cache: cache,
                interceptors: interceptors))
        let recorder = EventRecorder()
        transfers.delegate = recorder
        return (clock, mock, transfers, recorder)
    }

    @Test(arguments: [nil, "feed"] as [String?])
    func aStreamPastItsDeadlineThrowsAfterThePartsThatCame(scope: String?) async {
        let (clock, _, transfers, recorder) = make(Self.slow)
        let stream = transfers.bytes(for: TransferRequest(deadline: 3.5, concurrencyScope: scope))
        clock.advance(by: 10)
        var received = 0
        await #expect {
            for try await part in stream { received += part.count }
        } throws: { error in
            (error as? APIError)?.isTimeout == true
        }
        #expect(received == 400, "the parts of the first 3.5 s (at 0, 1, 2 and 3 s)")
        #expect(stream.task.state.name == "timedOut")
        #expect(recorder.events(of: stream.task).filter { !$0.hasPrefix("start") }.count == 1, "one terminal event")
    }

    @Test func aDownloadPastItsDeadlineKeepsItsPartAndTheNextRequestResumes() throws {
        let (clock, mock, transfers, _) = make(Self.slow, .status(206, body: Data()))
        let download = APIDownload(to: directory.url.appendingPathComponent("late.bin"))
        let task = transfers.send(TransferRequest(download: download, deadline: 4.5))
        clock.advance(by: 10)
        #expect(task.state.name == "timedOut")
        #expect(try Data(contentsOf: download.partialFile) == Self.body.prefix(500), "parts at 0 to 4 s")
        #expect(!FileManager.default.fileExists(atPath: download.destination.path))
        transfers.send(TransferRequest(download: download))
        #expect(mock.records.last?.request.value(forHTTPHeaderField: "Range") == "bytes=500-")
        #expect(mock.records.last?.request.value(forHTTPHeaderField: "If-Range") == "\"v1\"")
    }

    @Test func adaptersAndInspectorsSeeStreamedAndDownloadedTasks() async throws {
        let inspected = LockedState<[String]>([])
        let interceptor = ClosureInterceptor(
            onAdapt: { request, _ in
                var request = request
                request.setValue("signed", forHTTPHeaderField: "X-Signature")
                return request
            },
            onInspect: { response, attempt in
                inspected.withLock { $0.append("\(response.statusCode) \(response.fileURL?.lastPathComponent ?? "-")") }
                return .proceed
            })
        let (clock, mock, transfers, _) = make(Self.slow, Self.slow, interceptors: [interceptor])
        let stream = transfers.bytes(for: TransferRequest())
        let download = APIDownload(to: directory.url.appendingPathComponent("signed.bin"))
        let task = transfers.send(TransferRequest(download: download))
        clock.advance(by: 20)
        var received = Data()
        for try await part in stream { received.append(part) }
        #expect(received == Self.body)
        #expect(task.state.name == "finished")
        #expect(try Data(contentsOf: download.destination) == Self.body)
        #expect(mock.records.allSatisfy { $0.request.value(forHTTPHeaderField: "X-Signature") == "signed" })
        #expect(inspected.withLock { $0.sorted() } == ["200 -", "200 signed.bin"])
    }

    private static let cachable = MockTransport.Reply.status(
        200, headers: ["Cache-Control": "max-age=600", "ETag": "\"v1\""], body: body)

    private func collect(_ stream: APIByteStream) async throws -> [Data] {
        var parts: [Data] = []
        for try await part in stream { parts.append(part) }
        return parts
    }

    @Test func transfersAreNeitherStoredNorAnsweredFromTheCacheUnlessTheirRequestAsks() async throws {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let (clock, mock, transfers, _) = make(Self.cachable, Self.cachable, Self.cachable, cache: cache)
        let download = APIDownload(to: directory.url.appendingPathComponent("plain.bin"), ifExists: .replace)
        transfers.send(TransferRequest(download: download))
        clock.advance(by: 1)
        let streamed = transfers.bytes(for: TransferRequest())
        clock.advance(by: 1)
        #expect(try await collect(streamed).reduce(into: Data()) { $0.append($1) } == Self.body)
        transfers.send(TransferRequest(download: download))
        clock.advance(by: 1)
        #expect(mock.records.count == 3, "every one went to the network")
        #expect(cache.memoryCount == 0, "and none was stored")
    }

    @Test(arguments: [APIResponseCache.Option.fresh(maxAge: 600), .cacheOnly])
    func aDownloadThatAsksIsStoredThenWrittenFromTheCache(option: APIResponseCache.Option) throws {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let (clock, mock, transfers, _) = make(Self.cachable, cache: cache)
        let download = APIDownload(to: directory.url.appendingPathComponent("cached.bin"))
        let first = transfers.send(TransferRequest(download: download, cacheOption: option))
        clock.advance(by: 1)
        #expect(first.responseSource == .network)
        #expect(cache.memoryCount == 1, "stored: the body read back from the file")
        try FileManager.default.removeItem(at: download.destination)
        let second = transfers.send(TransferRequest(download: download, cacheOption: option))
        #expect(second.state.name == "finished")
        #expect(second.responseSource == .cache)
        #expect(mock.records.count == 1, "nothing sent")
        #expect(try Data(contentsOf: download.destination) == Self.body, "written from the cache")
        let third = transfers.send(TransferRequest(download: download, cacheOption: option))
        #expect(third.state.name == "invalidRequest", "the destination exists: as for the network, .fail")
    }

    @Test func aStreamThatAsksIsStoredThenGivenFromTheCacheInOnePart() async throws {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let (clock, mock, transfers, _) = make(Self.cachable.inChunks(4, every: 0.1), cache: cache)
        let streamed = transfers.bytes(for: TransferRequest(cacheOption: .fresh(maxAge: 600)))
        clock.advance(by: 1)
        #expect(try await collect(streamed).count == 4)
        let again = transfers.bytes(for: TransferRequest(cacheOption: .fresh(maxAge: 600)))
        #expect(try await collect(again) == [Self.body])
        #expect(again.task.responseSource == .cache)
        #expect(mock.records.count == 1)
    }

    @Test func aTransferLargerThanTheLimitIsNotStored() async throws {
        let events = LockedState<[String]>([])
        let cache = APIResponseCache(
            memoryBudget: 64 << 20, disk: nil,
            eventHandler: { event in
                if case .notStored(_, let reason) = event { events.withLock { $0.append(reason) } }
            })
        let big = Data(count: APIRequestDefaults.maxCachedTransferSize + 1)
        let (clock, _, transfers, _) = make(
            .status(200, headers: ["Cache-Control": "max-age=600"], body: big).inChunks(4, every: 0), cache: cache)
        let streamed = transfers.bytes(for: TransferRequest(cacheOption: .fresh(maxAge: 600)))
        clock.advance(by: 1)
        #expect(try await collect(streamed).reduce(0) { $0 + $1.count } == big.count)
        #expect(cache.memoryCount == 0)
        #expect(events.withLock { $0 }.contains { $0.contains("larger than") })
    }

    @Test func aDownloadRevalidatedWithA304IsWrittenFromTheStoredCopy() throws {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let (clock, mock, transfers, _) = make(Self.cachable, .status(304, headers: ["ETag": "\"v1\""]), cache: cache)
        let download = APIDownload(to: directory.url.appendingPathComponent("checked.bin"), ifExists: .replace)
        transfers.send(TransferRequest(download: download, cacheOption: .both))
        clock.advance(by: 1)
        try FileManager.default.removeItem(at: download.destination)
        let second = transfers.send(TransferRequest(download: download, cacheOption: .both))
        clock.advance(by: 1)
        #expect(mock.records.last?.request.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        #expect(second.state.name == "finished")
        #expect(second.responseSource == .revalidated)
        #expect(try Data(contentsOf: download.destination) == Self.body)
    }

    // MARK: A stored copy that no longer builds the response

    /// A response that refuses to build while the refusals left for its URL's path are above 0 (one
    /// each time): a type whose validation changed since the copy was stored. Per path, so tests
    /// running side by side do not meet.
    struct Picky: APIResponse {
        static let refusals = LockedState([String: Int]())
        struct Refused: Error {}
        init(from raw: APIRawResponse) throws {
            let path = raw.url?.path ?? ""
            let refuses = Self.refusals.withLock { counts -> Bool in
                defer { counts[path] = max(0, (counts[path] ?? 0) - 1) }
                return (counts[path] ?? 0) > 0
            }
            if refuses { throw Refused() }
        }
    }

    final class PickyTransfers: APIManager {
        typealias Request = TransferRequest
        typealias Response = Picky
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    /// A picky manager, and a download request of its own (path and file named after `name` and the
    /// scope), asking the cache with `cacheOption`.
    private func pickyDownload(
        _ name: String, scope: String?, cacheOption: APIResponseCache.Option
    ) -> (TestClock, MockTransport, PickyTransfers, TransferRequest) {
        let label = "\(name)-\(scope ?? "none")"
        let (clock, mock, transfers) = makePicky(
            path: "/\(label)", cache: APIResponseCache(memoryBudget: 1 << 20, disk: nil))
        var request = TransferRequest(
            download: APIDownload(to: directory.url.appendingPathComponent("\(label).bin")), cacheOption: cacheOption)
        request.concurrencyScope = scope
        request.path = "/\(label)"
        return (clock, mock, transfers, request)
    }

    private func makePicky(path: String, cache: APIResponseCache) -> (TestClock, MockTransport, PickyTransfers) {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, path, replies: [Self.cachable, Self.cachable.inChunks(2, every: 0.1)])
        let transfers = PickyTransfers(
            engine: APIEngine(transport: mock, clock: clock, delivery: .inline, execution: .inline, cache: cache))
        return (clock, mock, transfers)
    }

    @Test(arguments: [nil, "feed"] as [String?])
    func aStoredStreamThatNoLongerBuildsIsNotGivenAheadOfTheNetworksBody(scope: String?) async throws {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let path = "/picky-stream-\(scope ?? "none")"
        let (clock, mock, transfers) = makePicky(path: path, cache: cache)
        var request = TransferRequest(cacheOption: .fresh(maxAge: 600), concurrencyScope: scope)
        request.path = path
        let first = transfers.bytes(for: request)
        clock.advance(by: 1)
        #expect(try await collect(first) == [Self.body])
        #expect(cache.memoryCount == 1)
        Picky.refusals.withLock { $0[path] = 1 }  // the stored copy's build is refused, the network's is not
        let second = transfers.bytes(for: request)
        clock.advance(by: 1)
        let parts = try await collect(second)
        #expect(
            parts.reduce(into: Data()) { $0.append($1) } == Self.body,
            "the body once, from the network: \(parts.map(\.count))")
        #expect(second.task.responseSource == .network)
        #expect(mock.records.count == 2)
    }

    @Test(arguments: [nil, "files"] as [String?])
    func aStoredDownloadThatNoLongerBuildsLeavesNoFileAndTheNetworkWritesIt(scope: String?) throws {
        let (clock, mock, transfers, request) = pickyDownload("stored", scope: scope, cacheOption: .fresh(maxAge: 600))
        let download = try #require(request.download)
        transfers.send(request)
        clock.advance(by: 1)
        try FileManager.default.removeItem(at: download.destination)
        Picky.refusals.withLock { $0[request.path] = 1 }
        let second = transfers.send(request)
        clock.advance(by: 1)
        #expect(second.state.name == "finished", "not refused by the file the stored copy had written")
        #expect(second.responseSource == .network)
        #expect(mock.records.count == 2)
        #expect(try Data(contentsOf: download.destination) == Self.body)
    }

    @Test(arguments: [nil, "files"] as [String?])
    func aDownloadWhoseResponseIsRefusedLeavesNoFileAtItsDestination(scope: String?) throws {
        let (clock, mock, transfers, request) = pickyDownload("refused", scope: scope, cacheOption: .networkOnly)
        let download = try #require(request.download)
        Picky.refusals.withLock { $0[request.path] = 1 }
        let refused = transfers.send(request)
        clock.advance(by: 1)
        #expect(refused.state.name.hasPrefix("rejected"), "\(refused.state.name)")
        #expect(!FileManager.default.fileExists(atPath: download.destination.path), "no file for a failed task")
        let again = transfers.send(request)
        clock.advance(by: 1)
        #expect(again.state.name == "finished", "not refused by a file the failed task left")
        #expect(mock.records.count == 2)
        #expect(try Data(contentsOf: download.destination) == Self.body)
    }
}
