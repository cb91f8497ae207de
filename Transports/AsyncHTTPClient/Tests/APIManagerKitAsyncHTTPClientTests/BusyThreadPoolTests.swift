import APIManagerKit
import Dispatch
import Foundation
import NIOPosix
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// AsyncHTTPClientTransport writes a download's parts on NIO's thread pool: when the pool is busy
/// and the connection is cut, the attempt ends only after the parts received are on disk (the
/// corrections issue, item 4: the engine found a 0-byte part, removed it, and the next request
/// started from zero).
@Suite(
    "AsyncHTTPClientTransport: a download cut while the thread pool is busy",
    .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(2)), .serialized)
struct BusyThreadPoolTests {
    struct FileRequest: APIRequest {
        var url = Server.url
        var path: String
        var parameters: APIParameters = .none
        var download: APIDownload?
    }

    final class Files: APIManager, @unchecked Sendable {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine = APIEngine(transport: Shared.transport, delivery: .inline)
    }

    struct RangeLog: APIResponse, Decodable {
        let ranges: [String]
    }

    /// Keeps every thread of NIO's shared pool busy until the returned closure is called.
    private static func occupyThreadPool() -> @Sendable () -> Void {
        let gate = DispatchSemaphore(value: 0)
        let blockers = 64  // more than the pool has threads
        for _ in 0..<blockers {
            NIOThreadPool.singleton.submit { _ in gate.wait() }
        }
        return {
            for _ in 0..<blockers { gate.signal() }
        }
    }

    @Test func thePartReceivedIsKeptAndTheNextRequestResumesIt() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("BusyThreadPoolTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("cut.bin")
        let size = 64 << 10
        let realm = UUID().uuidString
        let request = FileRequest(
            path: "fixture/file/\(size)", parameters: .query(["realm": .string(realm), "cut": .int(1000)]),
            download: APIDownload(to: destination))
        let release = Self.occupyThreadPool()
        let cut = Task { try await Files().response(for: request) }
        // A short part and the cut arrive in one read: the cut reaches the client while the part's
        // write still waits for a thread.
        try await Task.sleep(for: .seconds(1.5))
        release()
        let first = await cut.result
        #expect(throws: APIError.self) { try first.get() }
        let part =
            (try? FileManager.default.attributesOfItem(atPath: APIDownload(to: destination).partialFile.path))?[
                .size] as? Int
        #expect((part ?? 0) > 0, "the part received is on disk, not lost with a late write")

        let response = try await Files().response(for: request)
        #expect(response.statusCode == 206)
        let log = try await Client<RangeLog>().response(for: HTTPRequest("fixture/file-log/\(realm)"))
        #expect(log.ranges.count == 2)
        #expect(log.ranges.last == "bytes=\(part ?? 0)-", "the next request asks for the rest of the part kept")
        #expect((try? FileManager.default.attributesOfItem(atPath: destination.path))?[.size] as? Int == size)
    }
}
