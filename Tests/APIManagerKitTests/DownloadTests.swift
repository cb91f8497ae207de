// Downloads to a file (issue 21, item 4): written to a partial file, moved into place, resumed with
// Range and If-Range, started over when the server says so; on the mock transport and a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Downloads to a file", .timeLimit(.minutes(1)))
struct DownloadTests {
    struct FileRequest: APIRequest {
        var url = testBaseURL
        var path = "/report.bin"
        var download: APIDownload?
        var retryPolicy: APIRetryPolicy?
        var concurrencyScope: String?
        var sharing: APIConcurrencyPolicy.Sharing = .never
        var reportsProgress = false
        var concurrencyPolicy: APIConcurrencyPolicy = .default
    }

    final class Files: APIManager {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static let full = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 13) })

    let directory = ScratchDirectory()
    var destination: URL { directory.url.appendingPathComponent("report.bin") }

    private func make(handler: @escaping @Sendable (URLRequest) -> MockTransport.Reply) -> (
        TestClock, MockTransport, Files
    ) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/report.bin", handler: handler)
        return (
            clock, transport,
            Files(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        )
    }

    /// The whole file, cut after `cut` bytes unless nil, with a strong ETag unless `etag` is nil.
    static func whole(etag: String? = "\"v1\"", cut: Int? = nil) -> MockTransport.Reply {
        var headers = ["Content-Length": "1000"]
        headers["ETag"] = etag
        let reply = MockTransport.Reply.status(200, headers: headers, body: full).inChunks(4, every: 1)
        return cut.map { reply.cut(after: $0) } ?? reply
    }

    /// The rest from `offset`, as a 206.
    static func rest(from offset: Int, etag: String = "\"v1\"") -> MockTransport.Reply {
        .status(
            206,
            headers: [
                "Content-Range": "bytes \(offset)-999/1000", "ETag": etag, "Content-Length": "\(1000 - offset)",
            ],
            body: full.subdata(in: offset..<1000))
    }

    private var leftovers: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []).filter { $0.hasPrefix(".") }
    }

    @Test(arguments: [nil, "files"] as [String?])
    func theBodyGoesToTheDestinationAndTheResponseNamesIt(scope: String?) throws {
        let (clock, transport, files) = make { _ in .status(200, body: Self.full) }
        let task = files.send(FileRequest(download: APIDownload(to: destination), concurrencyScope: scope))
        clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full)
        #expect(leftovers.isEmpty, "no partial file or record left")
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Accept-Encoding") == "identity")
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Range") == nil)
    }

    @Test func theTypedResponseGetsTheFileURLAndAnEmptyBody() async throws {
        let (_, _, files) = make { _ in .status(200, headers: ["X-Total": "1000"], body: Self.full) }
        let response = try await files.response(for: FileRequest(download: APIDownload(to: destination)))
        #expect(response.fileURL == destination)
        #expect(response.body.isEmpty)
        #expect(response.value(forHeader: "x-total") == "1000")
    }

    @Test func anExistingDestinationFailsUnlessItIsToBeReplaced() throws {
        try Data("old".utf8).write(to: destination)
        let (_, transport, files) = make { _ in .status(200, body: Self.full) }
        let refused = files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(refused.state.name == "invalidRequest")
        #expect(transport.records.isEmpty, "nothing is sent")
        let replacing = files.send(FileRequest(download: APIDownload(to: destination, ifExists: .replace)))
        #expect(replacing.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    @Test func aMissingDirectoryFailsBeforeAnythingIsSent() {
        let (_, transport, files) = make { _ in .status(200, body: Self.full) }
        let task = files.send(
            FileRequest(download: APIDownload(to: directory.url.appendingPathComponent("nowhere/report.bin"))))
        #expect(task.state.name == "invalidRequest")
        #expect(transport.records.isEmpty)
    }

    @Test(arguments: [nil, "files"] as [String?])
    func aRetryResumesWithRangeAndIfRange(scope: String?) throws {
        let (clock, transport, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil ? Self.whole(cut: 500) : Self.rest(from: 500)
        }
        let task = files.send(
            FileRequest(
                download: APIDownload(to: destination),
                retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none), concurrencyScope: scope))
        clock.advance(by: 10)
        #expect(task.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full)
        let second = try #require(transport.records.last?.request)
        #expect(second.value(forHTTPHeaderField: "Range") == "bytes=500-")
        #expect(second.value(forHTTPHeaderField: "If-Range") == "\"v1\"")
        #expect(leftovers.isEmpty)
    }

    @Test func aLaterRequestResumesWhatAnEarlierOneLeft() throws {
        let (clock, transport, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil ? Self.whole(cut: 250) : Self.rest(from: 250)
        }
        let first = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 10)
        #expect(first.state.name.hasPrefix("transport"))
        #expect(FileManager.default.fileExists(atPath: APIDownload(to: destination).partialFile.path), "kept")
        let second = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 1)
        #expect(second.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full)
        #expect(transport.records.last?.request.value(forHTTPHeaderField: "Range") == "bytes=250-")
    }

    @Test func aResumedDownloadsProgressGoesOnFromThePartOnDisk() async throws {
        let (clock, _, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil
                ? Self.whole(cut: 250) : Self.rest(from: 250).after(0.5).inChunks(3, every: 1)
        }
        files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 10)
        let second = files.send(FileRequest(download: APIDownload(to: destination), reportsProgress: true))
        let reports = second.progress
        clock.advance(by: 10)
        var seen: [String] = []
        for await progress in reports { seen.append("\(progress)") }
        #expect(second.state.name == "finished")
        #expect(seen == ["download #1 500/1000", "download #1 750/1000", "download #1 1000/1000 done"])
    }

    @Test func aSecondDownloadToTheSameDestinationWaitsForTheFirstToEnd() throws {
        let (clock, transport, files) = make { _ in Self.whole() }
        let first = files.send(FileRequest(download: APIDownload(to: destination)))
        let second = files.send(FileRequest(download: APIDownload(to: destination, ifExists: .replace)))
        guard case .failed(.invalidRequest(let reason, _)) = second.state else {
            Issue.record("expected invalidRequest, got \(second.state)")
            return
        }
        #expect(reason.contains("in progress"))
        #expect(transport.records.count == 1, "the second sent nothing")
        clock.advance(by: 10)
        #expect(first.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full, "the first's file, whole")
        let third = files.send(FileRequest(download: APIDownload(to: destination, ifExists: .replace)))
        clock.advance(by: 10)
        #expect(third.state.name == "finished", "free again once the first ended")
    }

    @Test func aSecondDownloadQueuedBehindTheFirstTakesTheDestinationWhenItsTurnComes() throws {
        let (clock, transport, files) = make { _ in Self.whole() }
        let request = FileRequest(
            download: APIDownload(to: destination, ifExists: .replace), concurrencyScope: "report",
            concurrencyPolicy: .waitUntilDone)
        let first = files.send(request)
        let second = files.send(request)
        #expect(second.state.name == "waiting", "queued, holding nothing")
        clock.advance(by: 10)
        #expect(first.state.name == "finished")
        clock.advance(by: 10)
        #expect(second.state.name == "finished", "the first let the destination go when it ended")
        #expect(transport.records.count == 2)
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    @Test func aCancelledDownloadsLateEndDoesNotFreeTheNextOnesDestination() throws {
        let transport = HeldSinkTransport()
        let files = Files(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let first = files.send(FileRequest(download: APIDownload(to: destination)))
        let firstFile = try #require(transport.file)
        let firstCompletion = try #require(transport.completion)
        first.cancel()
        let second = files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(transport.file !== firstFile, "the cancelled one let the destination go")
        firstCompletion(.failure(URLError(.cancelled)))  // its late end
        let third = files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(third.state.name == "invalidRequest", "the second still holds it")
        second.cancel()
    }

    @Test func aWholeAnswerToARangeStartsOver() throws {
        let changed = Data(repeating: 9, count: 700)
        let (clock, _, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil
                ? Self.whole(cut: 500) : .status(200, headers: ["ETag": "\"v2\""], body: changed)
        }
        let task = files.send(
            FileRequest(
                download: APIDownload(to: destination),
                retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock.advance(by: 10)
        #expect(task.state.name == "finished")
        #expect(try Data(contentsOf: destination) == changed, "the new file, not the old part plus the new one")
    }

    @Test func aRefusedRangeDropsThePartFileAndStartsOverAtOnce() throws {
        try Data(count: 300).write(to: APIDownload(to: destination).partialFile)
        try ResumeRecord(url: URL(string: "https://api.test/report.bin"), validator: "\"v0\"")
            .save(to: APIDownload(to: destination).resumeRecord)
        let (clock, transport, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil ? .status(200, body: Self.full) : .status(416)
        }
        let task = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(transport.records.map { $0.request.value(forHTTPHeaderField: "Range") ?? "-" } == ["bytes=300-", "-"])
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    @Test func withoutAValidatorAFailedDownloadLeavesNothing() {
        let (clock, transport, files) = make { _ in Self.whole(etag: nil, cut: 500) }
        files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 10)
        #expect(leftovers.isEmpty, "cannot be resumed: removed")
        files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(transport.records.last?.request.value(forHTTPHeaderField: "Range") == nil)
    }

    @Test func aCancelledDownloadKeepsItsPartUnlessItMayNotResume() {
        let (clock, _, files) = make { _ in Self.whole() }
        let resumable = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 1.5)
        resumable.cancel()
        #expect((try? FileSource.size(of: APIDownload(to: destination).partialFile)) == 500)
        let other = directory.url.appendingPathComponent("other.bin")
        let once = files.send(FileRequest(download: APIDownload(to: other, resumes: false)))
        clock.advance(by: 1.5)
        once.cancel()
        #expect(!FileManager.default.fileExists(atPath: APIDownload(to: other).partialFile.path))
    }

    @Test func partsArrivingAfterACancellationAreDroppedSoTheResumeIsWhole() throws {
        let transport = HeldSinkTransport()
        let files = Files(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = files.send(FileRequest(download: APIDownload(to: destination)))
        let file = try #require(transport.file)
        #expect(try file.begin(statusCode: 200, headers: ["ETag": "\"v1\""]))
        try file.write(Self.full.prefix(300))
        task.cancel()
        #expect(transport.cancelled)
        // The transport had more in hand: it writes it, then says it was cancelled.
        try file.write(Self.full[300..<600])
        transport.completion?(.failure(URLError(.cancelled)))
        let partial = try Data(contentsOf: APIDownload(to: destination).partialFile)
        #expect(partial == Self.full.prefix(300), "what arrived before the cancellation, and only that")
        files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(transport.file?.resumeOffset == 300)
    }

    /// A head the transport gives after the task was cancelled (its callback was already on its
    /// way) must not open the partial file: opening it for a `200` would empty the resumed part.
    @Test(arguments: [nil, "files"] as [String?])
    func aHeadArrivingAfterACancellationLeavesTheResumedPartWhole(scope: String?) throws {
        try Data(Self.full.prefix(300)).write(to: APIDownload(to: destination).partialFile)
        try ResumeRecord(url: URL(string: "https://api.test/report.bin"), validator: "\"v1\"", completeLength: 1000)
            .save(to: APIDownload(to: destination).resumeRecord)
        let transport = HeldSinkTransport()
        let files = Files(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = files.send(FileRequest(download: APIDownload(to: destination), concurrencyScope: scope))
        let file = try #require(transport.file)
        #expect(file.resumeOffset == 300)
        task.cancel()
        #expect(throws: APIError.self, "the transport is told to stop") {
            try file.begin(statusCode: 200, headers: ["ETag": "\"v2\"", "Content-Length": "1000"])
        }
        try file.write(Self.full)
        transport.completion?(.success(APIRawResponse(statusCode: 200, headers: ["ETag": "\"v2\""], body: Data())))
        #expect(task.state.name == "cancelled(explicit)")
        #expect(try Data(contentsOf: APIDownload(to: destination).partialFile) == Self.full.prefix(300))
        #expect(ResumeRecord.load(from: APIDownload(to: destination).resumeRecord)?.validator == "\"v1\"")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    /// A transport may hand over a head and parts of an attempt that already failed (its callbacks
    /// are behind) while the task waits for its retry: they reach nothing, and the retry resumes the
    /// part the failed attempt left.
    @Test(arguments: [nil, "files"] as [String?])
    func aLateHeadOfAFailedAttemptWhileTheRetryWaitsLeavesThePartWhole(scope: String?) throws {
        let clock = TestClock()
        let transport = HeldSinkTransport()
        let files = Files(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let task = files.send(
            FileRequest(
                download: APIDownload(to: destination),
                retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none), concurrencyScope: scope))
        let first = try #require(transport.file)
        #expect(try first.begin(statusCode: 200, headers: ["ETag": "\"v1\"", "Content-Length": "1000"]))
        try first.write(Self.full.prefix(300))
        transport.completion?(.failure(URLError(.networkConnectionLost)))
        #expect(task.state.name == "waitingForRetry")
        // The failed attempt's late callbacks, while the retry waits.
        #expect((try? first.begin(statusCode: 200, headers: ["ETag": "\"v2\"", "Content-Length": "1000"])) != true)
        _ = try? first.write(Data(repeating: 0xEE, count: 1000))
        let partial = APIDownload(to: destination).partialFile
        #expect(try Data(contentsOf: partial) == Self.full.prefix(300), "the part is the first 300 bytes, whole")
        clock.advance(by: 1)
        let second = try #require(transport.file)
        #expect(second !== first)
        #expect(second.resumeOffset == 300)
        let head = ["ETag": "\"v1\"", "Content-Range": "bytes 300-999/1000", "Content-Length": "700"]
        #expect(try second.begin(statusCode: 206, headers: head))
        try second.write(Self.full[300...])
        transport.completion?(.success(APIRawResponse(statusCode: 206, headers: head, body: Data())))
        #expect(task.state.name == "finished")
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    /// URLSession on Linux answers with success when its delegate queue is behind: the body was read
    /// before the cancellation reached it, and its parts are still queued.
    @Test(arguments: [nil, "files"] as [String?])
    func aCancelledDownloadAnsweredWithSuccessLeavesNoCutFileAtTheDestination(scope: String?) throws {
        let transport = HeldSinkTransport()
        let files = Files(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = files.send(FileRequest(download: APIDownload(to: destination), concurrencyScope: scope))
        let file = try #require(transport.file)
        #expect(try file.begin(statusCode: 200, headers: ["ETag": "\"v1\"", "Content-Length": "1000"]))
        try file.write(Self.full.prefix(300))
        task.cancel()
        try file.write(Self.full[300...])
        transport.completion?(.success(APIRawResponse(statusCode: 200, headers: ["ETag": "\"v1\""], body: Data())))
        #expect(task.state.name == "cancelled(explicit)")
        #expect(!FileManager.default.fileExists(atPath: destination.path), "a cut file never lands at the destination")
        let partial = try Data(contentsOf: APIDownload(to: destination).partialFile)
        #expect(partial == Self.full.prefix(300), "the part stays, to be resumed")
        files.send(FileRequest(download: APIDownload(to: destination)))
        #expect(transport.file?.resumeOffset == 300)
    }

    @Test func aDownloadPastItsSizeLimitFailsAndLeavesNothing() {
        let (clock, _, files) = make { _ in Self.whole() }
        let task = files.send(FileRequest(download: APIDownload(to: destination, maxSize: 600)))
        clock.advance(by: 10)
        #expect(task.state.name == "responseTooLarge(600)")
        #expect(leftovers.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func aRangeFromAnotherOffsetFailsAndDropsThePart() {
        let (clock, _, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil ? Self.whole(cut: 500) : Self.rest(from: 400)
        }
        let task = files.send(
            FileRequest(
                download: APIDownload(to: destination),
                retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock.advance(by: 10)
        #expect(task.state.name == "invalidRequest")
        #expect(leftovers.isEmpty)
    }

    @Test func anErrorStatusIsAnOrdinaryFailureAndWritesNoFile() {
        let (clock, _, files) = make { _ in .json(#"{"message":"gone"}"#, status: 404) }
        let task = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 1)
        #expect(task.state.name == "status(404)")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }

    @Test func downloadsAreNeverShared() {
        let (clock, transport, files) = make { _ in .status(200, body: Self.full).after(1) }
        let other = directory.url.appendingPathComponent("other.bin")
        files.send(FileRequest(download: APIDownload(to: destination, ifExists: .replace), sharing: .always))
        files.send(FileRequest(download: APIDownload(to: other, ifExists: .replace), sharing: .always))
        #expect(transport.records.count == 2)
        clock.advance(by: 1)
    }

    @Test func contentRangesAreReadStrictly() {
        #expect(APIResponseBodyFile.contentRangeStart("bytes 500-999/1000") == 500)
        #expect(APIResponseBodyFile.contentRangeStart(" bytes 0-0/*") == 0)
        #expect(APIResponseBodyFile.contentRangeStart("items 5-9/10") == nil)
        #expect(APIResponseBodyFile.contentRangeStart("bytes */1000") == nil)
    }

    /// RFC 9110 §14.4, with cases from werkzeug's `test_content_range_parsing` and
    /// `test_content_range_invalid_int`, bepasty's `test_contentrange_parse`, and the corrections issue.
    @Test(
        arguments: [
            ("bytes 0-98/*", ContentRange(first: 0, last: 98, completeLength: nil)),
            ("bytes 0-99/100", ContentRange(first: 0, last: 99, completeLength: 100)),
            ("bytes 0-0/2", ContentRange(first: 0, last: 0, completeLength: 2)),
            ("bytes 0-1/2", ContentRange(first: 0, last: 1, completeLength: 2)),
            ("BYTES 100-149/200", ContentRange(first: 100, last: 149, completeLength: 200)),
            ("  bytes 100-199/200\t", ContentRange(first: 100, last: 199, completeLength: 200)),
            ("bytes 0-98/*asdfsa", nil), ("bytes */-1", nil), ("bytes */100", nil), ("bytes */🯱🯲🯳", nil),
            ("bytes 1-+2/3", nil), ("bytes 1_23-125/*", nil), ("test 0-1/2", nil), ("bytes 1-0/2", nil),
            ("bytes 0-2/2", nil), ("bytes 100-199/199", nil), ("bytes 100-99/199", nil), ("bytes 100-199", nil),
            ("bytes -5-9/10", nil), ("bytes 0-9/10/10", nil), ("bytes=0-9/10", nil), ("bytes  0-9/10", nil),
            ("bytes 0-9223372036854775808/*", nil),
            (
                "bytes 0-9223372036854775806/9223372036854775807",
                ContentRange(first: 0, last: 9_223_372_036_854_775_806, completeLength: 9_223_372_036_854_775_807)
            ),
            ("", nil), ("bytes", nil), ("bytes ", nil), ("bytes 0-/10", nil), ("bytes -9/10", nil),
        ] as [(String, ContentRange?)])
    func aContentRangeIsValidOnlyAsRFC9110Says(field: String, expected: ContentRange?) {
        #expect(ContentRange(field) == expected)
    }

    @Test func aWeakETagOrALastModifiedTooCloseToTheDateIsNoValidator() {
        let date = "Tue, 24 Nov 2026 08:00:01 GMT"
        #expect(APIResponseBodyFile.validator(etag: "W/\"weak\"", lastModified: nil, date: date) == nil)
        #expect(
            APIResponseBodyFile.validator(etag: "W/\"weak\"", lastModified: "Tue, 24 Nov 2026 08:00:00 GMT", date: date)
                == "Tue, 24 Nov 2026 08:00:00 GMT", "one second before the Date: strong (RFC 9110 §13.1.5)")
        #expect(
            APIResponseBodyFile.validator(etag: nil, lastModified: "Tue, 24 Nov 2026 08:00:01 GMT", date: date) == nil,
            "the same second as the Date: weak")
        #expect(
            APIResponseBodyFile.validator(etag: nil, lastModified: "Tue, 24 Nov 2026 08:00:00 GMT", date: nil) == nil,
            "no Date to compare with: weak")
        #expect(
            APIResponseBodyFile.validator(etag: nil, lastModified: "yesterday", date: date) == nil, "not a date")
        #expect(APIResponseBodyFile.validator(etag: "\"v1\"", lastModified: nil, date: nil) == "\"v1\"")
    }

    /// A part written with `validator`, then the rest answered by `rest`, in one task of `attempts`.
    private func resume(
        partOf length: Int = 500, record: ResumeRecord? = nil, attempts: Int = 1,
        rest: @escaping @Sendable (URLRequest) -> MockTransport.Reply
    ) throws -> (MockTransport, APITask<FileRequest>) {
        let download = APIDownload(to: destination)
        try Self.full.prefix(length).write(to: download.partialFile)
        try (record ?? ResumeRecord(url: testBaseURL.appendingPathComponent("report.bin"), validator: "\"one\""))
            .save(to: download.resumeRecord)
        let (clock, transport, files) = make { request in
            request.value(forHTTPHeaderField: "Range") == nil ? .status(200, body: Self.full) : rest(request)
        }
        let task = files.send(
            FileRequest(
                download: download, retryPolicy: APIRetryPolicy(maxAttempts: attempts, baseDelay: 1, jitter: .none)))
        clock.advance(by: 10)
        return (transport, task)
    }

    @Test(arguments: ["bytes 500-999/999", "bytes 500-499/1000", "bytes 500-999/500", "bytes 500-999"])
    func aPartWithAnInvalidContentRangeIsNeverAppended(contentRange: String) throws {
        let (transport, task) = try resume { _ in
            .status(206, headers: ["Content-Range": contentRange, "ETag": "\"one\""], body: Self.full.suffix(500))
        }
        #expect(task.state.name == "invalidRequest")
        #expect(transport.records.count == 1)
        #expect(!FileManager.default.fileExists(atPath: destination.path), "no file made of a refused answer")
        #expect(leftovers.isEmpty, "the part is dropped with the answer")
    }

    @Test(arguments: [nil, "files"] as [String?])
    func aPartOfAnotherVersionStartsOverInsteadOfBeingAppended(scope: String?) throws {
        let other = Data(repeating: 7, count: 1000)
        let (transport, task) = try resume { _ in
            .status(
                206, headers: ["Content-Range": "bytes 500-999/1000", "ETag": "\"two\""], body: other.suffix(500))
        }
        #expect(task.state.name == "finished")
        #expect(
            transport.records.map { $0.request.value(forHTTPHeaderField: "If-Range") ?? "-" } == ["\"one\"", "-"],
            "asked with \"one\", answered with \"two\": the part is dropped and the file asked for whole")
        #expect(try Data(contentsOf: destination) == Self.full, "one version of the file, not two")
        _ = scope
    }

    @Test func aPartOfAnotherLengthStartsOver() throws {
        let record = ResumeRecord(
            url: testBaseURL.appendingPathComponent("report.bin"), validator: "\"one\"", completeLength: 1200)
        let (transport, task) = try resume(record: record) { _ in Self.rest(from: 500) }
        #expect(task.state.name == "finished")
        #expect(transport.records.count == 2, "the part was of a 1200-byte file: started over")
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    @Test func aPartWithTheSameValidatorOrNoneIsAppended() throws {
        for etag in ["\"one\"", nil] {
            try? FileManager.default.removeItem(at: destination)
            let (transport, task) = try resume { _ in
                var headers = ["Content-Range": "bytes 500-999/1000"]
                headers["ETag"] = etag
                return .status(206, headers: headers, body: Self.full.suffix(500))
            }
            #expect(task.state.name == "finished")
            #expect(transport.records.count == 1)
            #expect(try Data(contentsOf: destination) == Self.full)
        }
    }

    @Test func aPartThatEndsBeforeTheCompleteLengthIsKeptAndNeverTakenForTheWhole() throws {
        let (transport, task) = try resume { _ in
            .status(
                206, headers: ["Content-Range": "bytes 500-749/1000", "ETag": "\"one\""],
                body: Self.full[500..<750])
        }
        #expect(task.state.name == "transport(-1005)", "as a dropped connection: retried by default")
        #expect(transport.records.count == 1)
        #expect(!FileManager.default.fileExists(atPath: destination.path), "a partial file is never the whole")
        #expect(try Data(contentsOf: APIDownload(to: destination).partialFile) == Self.full.prefix(750))
        #expect(ResumeRecord.load(from: APIDownload(to: destination).resumeRecord)?.completeLength == 1000)
    }

    @Test func aRetryAsksForWhatAShortPartLeftOut() throws {
        let (transport, task) = try resume(attempts: 2) { request in
            request.value(forHTTPHeaderField: "Range") == "bytes=500-"
                ? .status(
                    206, headers: ["Content-Range": "bytes 500-749/1000", "ETag": "\"one\""],
                    body: Self.full[500..<750])
                : Self.rest(from: 750, etag: "\"one\"")
        }
        #expect(task.state.name == "finished")
        #expect(
            transport.records.map { $0.request.value(forHTTPHeaderField: "Range") } == ["bytes=500-", "bytes=750-"])
        #expect(try Data(contentsOf: destination) == Self.full)
    }

    @Test func aWholeBodyShorterThanItsContentLengthIsNotMovedIntoPlace() throws {
        let (clock, _, files) = make { _ in
            .status(200, headers: ["Content-Length": "1000", "ETag": "\"v1\""], body: Self.full.prefix(600))
        }
        let task = files.send(FileRequest(download: APIDownload(to: destination)))
        clock.advance(by: 1)
        #expect(task.state.name == "transport(-1005)")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect((try? FileSource.size(of: APIDownload(to: destination).partialFile)) == 600, "kept, to be resumed")
    }

    @Test func aLastModifiedDateResumesOnlyWhenItIsStrong() throws {
        for (lastModified, resumes) in [
            ("Tue, 24 Nov 2026 08:00:00 GMT", true), ("Tue, 24 Nov 2026 08:00:05 GMT", false),
        ] {
            try? FileManager.default.removeItem(at: APIDownload(to: destination).partialFile)
            let headers = [
                "Content-Length": "1000", "Last-Modified": lastModified, "Date": "Tue, 24 Nov 2026 08:00:05 GMT",
            ]
            let calls = LockedState(0)
            let (clock, transport, files) = make { request in
                let first = calls.withLock { calls in
                    defer { calls += 1 }
                    return calls == 0
                }
                let whole = MockTransport.Reply.status(200, headers: headers, body: Self.full).inChunks(4, every: 1)
                if first { return whole.cut(after: 500) }
                return request.value(forHTTPHeaderField: "Range") == nil ? whole : Self.rest(from: 500)
            }
            let first = files.send(FileRequest(download: APIDownload(to: destination)))
            clock.advance(by: 10)
            #expect(first.state.name == "transport(-1005)")
            let again = files.send(FileRequest(download: APIDownload(to: destination)))
            clock.advance(by: 10)
            #expect(again.state.name == "finished")
            let second = try #require(transport.records.last?.request)
            #expect(second.value(forHTTPHeaderField: "If-Range") == (resumes ? lastModified : nil), "\(lastModified)")
            #expect(try Data(contentsOf: destination) == Self.full)
            try FileManager.default.removeItem(at: destination)
        }
    }
}
