import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Downloads to a file against the real server (issue 21, item 4): a file route that honours Range
/// and If-Range as nginx does, and drops the connection half-way when asked.
@Suite("Integration: downloads", .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(3)))
struct DownloadIntegrationTests {
    struct FileRequest: APIRequest {
        var url = Server.url
        var path: String
        var parameters: APIParameters = .none
        var download: APIDownload?
        var retryPolicy: APIRetryPolicy?
        var reportsProgress: Bool { true }
    }

    final class Files: APIManager, @unchecked Sendable {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine = APIEngine(transport: Shared.transport, delivery: .inline)
    }

    struct Digest: APIResponse, Decodable {
        let bytes: Int
        let sha256: String
    }

    struct RangeLog: APIResponse, Decodable {
        let ranges: [String]
    }

    private static func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("DownloadIntegrationTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    private static func expectedDigest(_ size: Int) async throws -> String {
        try await Client<Digest>().response(for: HTTPRequest("fixture/file-digest/\(size)")).sha256
    }

    @Test func aLargeFileIsDownloadedToItsDestination() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("big.bin")
        let size = 128 << 20
        let response = try await Files().response(
            for: FileRequest(path: "fixture/file/\(size)", download: APIDownload(to: destination)))
        #expect(response.fileURL == destination)
        #expect(response.body.isEmpty)
        #expect(try sha256Hex(ofFile: destination) == (try await Self.expectedDigest(size)))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["big.bin"])
    }

    @Test func aDownloadCutHalfWayResumesOnItsRetry() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("cut.bin")
        let size = 16 << 20
        let realm = UUID().uuidString
        let response = try await Files().response(
            for: FileRequest(
                path: "fixture/file/\(size)", parameters: .query(["realm": .string(realm), "cut": .int(5 << 20)]),
                download: APIDownload(to: destination),
                retryPolicy: APIRetryPolicy(maxAttempts: 3, baseDelay: 0.05, jitter: .none)))
        #expect(response.statusCode == 206)
        #expect(try sha256Hex(ofFile: destination) == (try await Self.expectedDigest(size)))
        let log = try await Client<RangeLog>().response(for: HTTPRequest("fixture/file-log/\(realm)"))
        #expect(log.ranges.count == 2)
        #expect(log.ranges.first == "-")
        let resumedAt = Int(log.ranges.last?.dropFirst("bytes=".count).dropLast() ?? "") ?? 0
        #expect(resumedAt > 0 && resumedAt <= 5 << 20, "resumed from what was on disk: \(log.ranges)")
    }

    @Test func aChangedFileStartsOverInsteadOfResuming() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("changed.bin")
        let size = 1 << 20
        let download = APIDownload(to: destination)
        // A part of an older version, with its validator.
        try Data(repeating: 0xEE, count: 1000).write(to: download.partialFile)
        let record = #"{"url":"\#(Server.url.absoluteString)/fixture/file/\#(size)","validator":"\"old\""}"#
        try Data(record.utf8).write(
            to: download.partialFile.deletingLastPathComponent()
                .appendingPathComponent(".changed.bin.apidownload-resume"))
        let response = try await Files().response(for: FileRequest(path: "fixture/file/\(size)", download: download))
        #expect(response.statusCode == 200, "If-Range did not match: the whole file")
        #expect(try sha256Hex(ofFile: destination) == (try await Self.expectedDigest(size)))
    }

    // MARK: A resumed file is the server's whole file or nothing (the corrections issue, items 1–3)

    /// A partial file of the first 100 bytes of `/fixture/range-answer/MODE` (the pattern i % 251)
    /// with its record (validator "one"), then the request that resumes it.
    private static func resume(_ mode: String, in directory: URL) async -> (APIDownload, APIError?) {
        let destination = directory.appendingPathComponent("\(mode).bin")
        let download = APIDownload(to: destination)
        let pattern = Data((0..<1000).map { UInt8($0 % 251) })
        try? pattern.prefix(100).write(to: download.partialFile)
        let url = "\(Server.url.absoluteString)/fixture/range-answer/\(mode)"
        let record = #"{"url":"\#(url)","validator":"\"one\"","completeLength":1000}"#
        try? Data(record.utf8).write(
            to: directory.appendingPathComponent(".\(mode).bin.apidownload-resume"))
        let error = await failure { () async throws(APIError) in
            try await Files().response(for: FileRequest(path: "fixture/range-answer/\(mode)", download: download))
        }
        return (download, error)
    }

    @Test func aPartWithAnInvalidContentRangeIsRefusedAndDropped() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (download, error) = await Self.resume("invalid", in: directory)
        guard case .invalidRequest? = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: download.destination.path))
        #expect(!FileManager.default.fileExists(atPath: download.partialFile.path), "the part is dropped")
    }

    @Test func aPartOfAnotherVersionStartsOverFromTheFirstByte() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (download, error) = await Self.resume("other-etag", in: directory)
        #expect(error == nil, "\(String(describing: error))")
        let file = try Data(contentsOf: download.destination)
        #expect(file == Data((0..<1000).map { UInt8($0 % 251) }), "version one, whole, never joined to two")
    }

    @Test func aPartThatEndsBeforeTheCompleteLengthIsKeptAndNotMovedIntoPlace() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (download, error) = await Self.resume("short", in: directory)
        #expect((error?.underlyingError as? URLError)?.code == .networkConnectionLost, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: download.destination.path), "never taken for the whole")
        let part = try Data(contentsOf: download.partialFile)
        #expect(part == Data((0..<110).map { UInt8($0 % 251) }), "the part and the 10 bytes that came")
    }
}
