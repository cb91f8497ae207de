import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// nginx, which the test command installs and starts on 127.0.0.1 (Scripts/nginx.sh), serving files
/// the tests generate in its root (issue 21: downloads from nginx with `Range` support). `/slow/FILE`
/// is served at 4 MiB/s unless the request asks for a range, so a download can be cancelled part-way
/// and resumed at full speed.
@Suite("Integration: nginx", .enabled(if: Nginx.isAvailable, Nginx.skipReason), .timeLimit(.minutes(2)))
struct NginxIntegrationTests {
    struct FileRequest: APIRequest {
        var url = Nginx.url
        var path: String
        var download: APIDownload?
        var reportsProgress: Bool { true }
    }

    final class Files: APIManager, @unchecked Sendable {
        typealias Request = FileRequest
        typealias Response = APIRawResponse
        let engine = APIEngine(transport: Shared.transport, delivery: .inline)
    }

    /// Cancels a task once it has downloaded `threshold` bytes.
    final class CancelPartWay: APIManagerDelegate, Sendable {
        let threshold: Int64
        init(after threshold: Int64) { self.threshold = threshold }
        func apiManager(_ manager: any APIManager, task: AnyAPITask, didReport progress: APITransferProgress) {
            if progress.direction == .download, progress.completedBytes >= threshold { task.cancel() }
        }
    }

    /// A file of `size` random bytes under nginx's root, named uniquely; its contents.
    private static func servedFile(size: Int) throws -> (name: String, contents: Data) {
        var generator = SystemRandomNumberGenerator()
        let contents = Data((0..<size / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } })
        let name = "file-\(UUID().uuidString).bin"
        try contents.write(to: Nginx.root.appendingPathComponent(name))
        return (name, contents)
    }

    private static func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("NginxIntegrationTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Downloads `/slow/name` until `bytes` have arrived, then cancels: a partial file is left.
    private static func cancelPartWay(_ name: String, bytes: Int64, download: APIDownload) async throws {
        let manager = Files()
        let canceller = CancelPartWay(after: bytes)
        manager.delegate = canceller
        do {
            _ = try await manager.response(for: FileRequest(path: "slow/\(name)", download: download))
            Issue.record("the download was not cancelled")
        } catch {
            #expect(error.isCancellation, "\(error)")
        }
        let kept = try fileSize(download.partialFile)
        #expect(kept >= bytes, "the part received stays on disk: \(kept) bytes")
        #expect(!FileManager.default.fileExists(atPath: download.destination.path))
    }

    @Test func aFileIsDownloadedWholeFromNginx() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("big.bin")
        let response = try await Files().response(
            for: FileRequest(path: "big.bin", download: APIDownload(to: destination)))
        #expect(response.statusCode == 200)
        #expect(response.fileURL == destination)
        let served = try Data(contentsOf: Nginx.root.appendingPathComponent("big.bin"))
        #expect(try Data(contentsOf: destination) == served)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["big.bin"])
    }

    @Test func aCancelledDownloadResumesWithRangeOnTheNextRequest() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (name, contents) = try Self.servedFile(size: 16 << 20)
        let download = APIDownload(to: directory.appendingPathComponent(name))
        try await Self.cancelPartWay(name, bytes: 1 << 20, download: download)

        let response = try await Files().response(for: FileRequest(path: "slow/\(name)", download: download))
        #expect(response.statusCode == 206, "nginx answered the Range with the rest")
        #expect(try Data(contentsOf: download.destination) == contents)
        #expect(!FileManager.default.fileExists(atPath: download.partialFile.path))
    }

    @Test func aDownloadWhoseFileChangedOnNginxStartsOver() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (name, _) = try Self.servedFile(size: 16 << 20)
        let download = APIDownload(to: directory.appendingPathComponent(name))
        try await Self.cancelPartWay(name, bytes: 1 << 20, download: download)
        // A new version of another size: nginx's ETag (modification time and size) changes.
        let newer = Data(repeating: 0x5A, count: 3 << 20)
        try newer.write(to: Nginx.root.appendingPathComponent(name))

        let response = try await Files().response(for: FileRequest(path: "slow/\(name)", download: download))
        #expect(response.statusCode == 200, "If-Range did not match: nginx sent the whole new file")
        #expect(try Data(contentsOf: download.destination) == newer)
    }

    struct CachedFileRequest: APIRequest {
        var url = Nginx.url
        var path: String
        var download: APIDownload?
        var cacheOption: APIResponseCache.Option { .both }
    }

    final class CachedFiles: APIManager, @unchecked Sendable {
        typealias Request = CachedFileRequest
        typealias Response = APIRawResponse
        let engine = APIEngine(
            transport: Shared.transport, delivery: .inline,
            cache: APIResponseCache(memoryBudget: 16 << 20, disk: nil))
    }

    @Test func aDownloadThatAsksForTheCacheIsRevalidatedByNginxAndWrittenFromTheStoredCopy() async throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (name, contents) = try Self.servedFile(size: 1 << 20)
        let download = APIDownload(to: directory.appendingPathComponent(name), ifExists: .replace)
        let manager = CachedFiles()
        let first = try await manager.response(for: CachedFileRequest(path: name, download: download))
        #expect(first.statusCode == 200)
        try FileManager.default.removeItem(at: download.destination)
        var sources: [APIResponseCache.Source] = []
        for try await answer in manager.responses(for: CachedFileRequest(path: name, download: download)) {
            sources.append(answer.source)
        }
        #expect(sources == [.revalidated], "nginx answered 304 to If-None-Match")
        #expect(try Data(contentsOf: download.destination) == contents)
    }

    @Test func aStreamedFileFromNginxArrivesWholeAndInOrder() async throws {
        let (name, contents) = try Self.servedFile(size: 24 << 20)
        var received = Data()
        var parts = 0
        for try await part in Files().bytes(for: FileRequest(path: name)) {
            received.append(part)
            parts += 1
        }
        #expect(received == contents)
        #expect(parts > 1, "the body came in parts")
    }
}

/// The nginx Scripts/integration-server.sh started, from the environment.
enum Nginx {
    static let base = ProcessInfo.processInfo.environment["APIMANAGERKIT_NGINX"].flatMap(URL.init(string:))
    static let rootPath = ProcessInfo.processInfo.environment["APIMANAGERKIT_NGINX_ROOT"]
    static let isAvailable = base != nil && rootPath != nil
    static let skipReason: Comment =
        "APIMANAGERKIT_NGINX is not set: the nginx tests are SKIPPED. Run `bash Scripts/test.sh`, which starts nginx."
    static var url: URL { base ?? URL(fileURLWithPath: "/") }
    static var root: URL { URL(fileURLWithPath: rootPath ?? "/nonexistent") }
}

/// The size of the file at `url` (0 when there is none).
func fileSize(_ url: URL) throws -> Int64 {
    guard FileManager.default.fileExists(atPath: url.path) else { return 0 }
    return (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value ?? 0
}
