// Files the library writes with the user's data (the corrections issue, items 26 and 27): owner-only,
// never through a link planted beside them, leftovers of a killed process swept at next use; a
// stream's overflow file that cannot be made, or grows past its limit, fails the stream typed.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Files on disk", .timeLimit(.minutes(1)))
struct FilesOnDiskTests {
    let directory = ScratchDirectory()

    private func mode(of url: URL) -> UInt32? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return nil }
        return UInt32(info.st_mode) & 0o777
    }

    // MARK: Owner-only, never through a link

    @Test func aMultipartFormWrittenToAFileIsOwnerOnlyAndReplacesALinkWithoutFollowingIt() throws {
        let target = directory.url.appendingPathComponent("victim.txt")
        try Data("untouched".utf8).write(to: target)
        let link = directory.url.appendingPathComponent("form.bin")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        var form = try APIMultipartFormData(boundary: "b")
        try form.append("secret", name: "password")
        try form.write(to: link)
        #expect(try String(contentsOf: target, encoding: .utf8) == "untouched", "the link's target is left alone")
        #expect(OwnerOnlyFile.isRegularFileOfOurs(link), "the link was replaced by a file")
        #expect(mode(of: link) == 0o600)
    }

    @Test func aSpooledFormIsOwnerOnlyAndNamedAfterItsProcess() throws {
        try SpoolingTurns.take {
            let url = BodyFile.newTemporaryURL()
            defer { try? FileManager.default.removeItem(at: url) }
            #expect(url.lastPathComponent.hasPrefix("APIManagerKit-body-\(getpid())-"))
            var form = try APIMultipartFormData(boundary: "b")
            try form.append(APIFile(data: Data(count: 1000), fileName: "a.bin"), name: "file")
            try form.write(to: url)
            #expect(mode(of: url) == 0o600, "a copy of a 0600 file is not world-readable")
        }
    }

    @Test func theLeftoversOfAKilledProcessAreSweptAndNothingElse() throws {
        // A process that has ended: its pid names no process now.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.run()
        process.waitUntilExit()
        let dead = process.processIdentifier
        let prefix = "APIManagerKit-sweep-test"
        let names = [
            "\(prefix)-\(dead)-\(UUID().uuidString)",  // a killed process's: swept
            "\(prefix)-\(getpid())-\(UUID().uuidString)",  // this process's: kept
            "\(prefix)-1-\(UUID().uuidString)",  // a live process's (init): kept
            "\(prefix)-\(dead)-not-a-uuid",  // not ours by name: kept
            "other-\(dead)-\(UUID().uuidString)",  // another prefix: kept
        ]
        for name in names { try Data("x".utf8).write(to: directory.url.appendingPathComponent(name)) }
        let target = directory.url.appendingPathComponent("target")
        try Data("keep".utf8).write(to: target)
        let link = "\(prefix)-\(dead)-\(UUID().uuidString)"
        try FileManager.default.createSymbolicLink(
            at: directory.url.appendingPathComponent(link), withDestinationURL: target)
        #expect(OwnerOnlyFile.sweepTemporaryFiles(prefix: prefix, in: directory.url) == 1)
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: directory.url.path))
        #expect(left == Set(names.dropFirst() + ["target", link]), "only the dead process's regular file went")
        #expect(try String(contentsOf: target, encoding: .utf8) == "keep")
    }

    // MARK: Downloads

    struct FileRequest: APIRequest {
        var url = testBaseURL
        var path = "/report.bin"
        var download: APIDownload?
    }

    final class Files: APIManager {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static let full = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    @Test(arguments: [false, true])
    func aLinkPlantedAsTheDownloadsPartialFileIsNeverWrittenThrough(forgedRecord: Bool) throws {
        let destination = directory.url.appendingPathComponent("report.bin")
        let download = APIDownload(to: destination)
        let victim = directory.url.appendingPathComponent("victim.txt")
        try Data("the victim's 300 bytes".utf8).write(to: victim)
        try FileManager.default.createSymbolicLink(at: download.partialFile, withDestinationURL: victim)
        if forgedRecord {
            try ResumeRecord(url: testBaseURL.appendingPathComponent("report.bin"), validator: "\"v1\"")
                .save(to: download.resumeRecord)
        }
        let transport = MockTransport()
        transport.stub(nil, "/report.bin") { request in
            request.value(forHTTPHeaderField: "Range") == nil
                ? .status(200, headers: ["ETag": "\"v1\"", "Content-Length": "1000"], body: Self.full)
                : .status(
                    206, headers: ["ETag": "\"v1\"", "Content-Range": "bytes 22-999/1000"], body: Self.full.suffix(978))
        }
        let files = Files(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = files.send(FileRequest(download: download))
        #expect(task.state.name == "finished")
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Range") == nil, "not resumed")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "the victim's 300 bytes", "nothing appended")
        #expect(OwnerOnlyFile.isRegularFileOfOurs(destination), "the destination is a file, not the link")
        #expect(try Data(contentsOf: destination) == Self.full)
        #expect(mode(of: destination) == 0o600)
    }

    @Test func aResumeRecordThatIsALinkIsNotRead() throws {
        let record = directory.url.appendingPathComponent("record")
        try ResumeRecord(url: nil, validator: "\"v1\"").save(to: record)
        #expect(ResumeRecord.load(from: record) != nil)
        #expect(mode(of: record) == 0o600)
        let link = directory.url.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: record)
        #expect(ResumeRecord.load(from: link) == nil)
    }

    // MARK: A stream's overflow file

    /// Pushes `count` parts of 1 MiB as a transport that does not wait would.
    private func overflow(_ buffer: StreamBuffer, parts count: Int) {
        let stream = APIResponseBodyStream(buffer: buffer)
        _ = stream.begin(statusCode: 200, headers: [:])
        for index in 0..<count { _ = stream.write(Data(repeating: UInt8(index), count: 1 << 20)) {} }
    }

    @Test func aStreamWhoseOverflowFileCannotBeMadeFailsTypedAndHoldsNoMoreThanItsMemoryLimit() async {
        let missing = directory.url.appendingPathComponent("no-such-directory")
        let buffer = StreamBuffer(spillDirectory: missing)
        overflow(buffer, parts: 40)
        #expect(buffer.heldBytes <= APIResponseBodyStream.memoryLimit, "never more than the memory limit")
        var received = 0
        await #expect {
            while let chunk = try await buffer.next() { received += chunk.count }
        } throws: { error in
            guard case .transport = error as? APIError else { return false }
            return true
        }
        #expect(received == APIResponseBodyStream.memoryLimit, "the parts it held, then the failure")
    }

    @Test func aStreamWhoseOverflowPassesItsLimitFailsWithResponseTooLarge() async {
        let buffer = StreamBuffer(spillLimit: 4 << 20, spillDirectory: directory.url)
        overflow(buffer, parts: 40)
        #expect(buffer.spilledBytes <= 4 << 20, "the file holds at most its limit")
        var received = 0
        await #expect {
            while let chunk = try await buffer.next() { received += chunk.count }
        } throws: { error in
            guard case .responseTooLarge(let limit) = error as? APIError else { return false }
            return limit == APIResponseBodyStream.memoryLimit + (4 << 20)
        }
        #expect(received == APIResponseBodyStream.memoryLimit + (4 << 20), "every byte it held, in order")
        #expect(APIResponseBodyStream.spillLimit == 512 << 20)
    }

    /// A stream that fails under its transport (its overflow past the limit) stops the transfer
    /// itself, and its task fails with the stream's error: not a cancellation.
    @Test(arguments: [nil, "feed"] as [String?])
    func aStreamThatFailsUnderItsTransportFailsItsTaskWithTheSameError(scope: String?) throws {
        let transport = HeldSinkTransport()
        let feed = StreamingTests.Feed(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let buffer = StreamBuffer(spillLimit: 1 << 20, spillDirectory: directory.url)
        let task = feed.makeTask(
            for: StreamingTests.FeedRequest(
                retryPolicy: APIRetryPolicy(maxAttempts: 3, baseDelay: 0), concurrencyScope: scope),
            bodyStream: buffer)
        feed.engine.submit(task)
        let stream = try #require(transport.stream)
        #expect(stream.begin(statusCode: 200, headers: [:]))
        for index in 0..<12 where !transport.cancelled {
            _ = stream.write(Data(repeating: UInt8(index), count: 1 << 20)) {}
        }
        #expect(transport.cancelled, "the stream stopped its transfer")
        transport.completion?(.failure(URLError(.cancelled)))
        #expect(task.state.name == "responseTooLarge(\(APIResponseBodyStream.memoryLimit + (1 << 20)))")
        #expect(stream.state.failure == .sinkFailed)
    }

    /// The same with the response cache on and the request asking for it: the failed stream
    /// stores nothing, and the cache answers nothing on the next request.
    @Test(arguments: [nil, "feed"] as [String?])
    func aStreamThatFailsUnderItsTransportWithTheCacheOnStoresNothing(scope: String?) throws {
        let transport = HeldSinkTransport()
        let cache = APIResponseCache(disk: nil)
        let feed = StreamingTests.Feed(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .inline, cache: cache))
        let buffer = StreamBuffer(spillLimit: 1 << 20, spillDirectory: directory.url)
        let task = feed.makeTask(
            for: StreamingTests.FeedRequest(concurrencyScope: scope, cacheOption: .both), bodyStream: buffer)
        feed.engine.submit(task)
        let stream = try #require(transport.stream)
        #expect(stream.begin(statusCode: 200, headers: ["Cache-Control": "max-age=600"]))
        for index in 0..<12 where !transport.cancelled {
            _ = stream.write(Data(repeating: UInt8(index), count: 1 << 20)) {}
        }
        #expect(transport.cancelled, "the stream stopped its transfer")
        transport.completion?(.failure(URLError(.cancelled)))
        #expect(task.state.name == "responseTooLarge(\(APIResponseBodyStream.memoryLimit + (1 << 20)))")
        #expect(cache.memoryCount == 0, "a stream that failed is never stored")
        let next = feed.send(StreamingTests.FeedRequest(concurrencyScope: scope, cacheOption: .both))
        #expect(next.state.name == "running", "the next request goes to the network, not to a stored copy")
    }

    @Test func theOverflowFileIsGoneFromItsDirectoryAtOnce() throws {
        let buffer = StreamBuffer(spillDirectory: directory.url)
        overflow(buffer, parts: 12)
        #expect(buffer.spilledBytes > 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).isEmpty, "unlinked at once")
    }
}
