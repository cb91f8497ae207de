import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache under hostile conditions: forged files, hostile directories, oversized entries, and
/// authenticated responses without a partition.
@Suite("Cache: forged files, hostile directories, authenticated responses", .timeLimit(.minutes(1)))
struct CacheFilesAndPartitionsTests {
    @Test func replacingAnEntryByOneLargerThanTheBudgetKeepsMemoryWithinIt() {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let key = APIResponseCache.Key(method: "GET", url: "https://a.test/big")
        cache.store(APIRawResponse(statusCode: 200, body: Data(count: 100)), for: key)
        #expect(cache.memoryCount == 1)
        cache.store(APIRawResponse(statusCode: 200, body: Data(count: 16 << 20)), for: key)
        #expect(cache.memoryUsage <= 1 << 20)
        #expect(cache.entry(for: key) == nil, "the old entry is out of date and the new one does not fit")
        cache.store(APIRawResponse(statusCode: 200, body: Data(count: 200)), for: key)
        #expect(cache.entry(for: key)?.response.body.count == 200)
    }

    @Test func aSymlinkedDirectoryIsRefusedAndItsTargetLeftAlone() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let target = directory.url.appendingPathComponent("target")
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        #expect(chmod(target.path, 0o755) == 0)
        let planted = target.appendingPathComponent("keep.apicache")
        try Data("x".utf8).write(to: planted)
        let link = directory.url.appendingPathComponent("cache")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        let log = CacheEventLog()
        let cache = APIResponseCache(disk: .init(directory: link), eventHandler: log.handler)
        #expect(!cache.hasDiskTier)
        #expect(
            log.all.contains { event in
                if case .diskUnavailable(let reason) = event { return reason.contains("symbolic link") }
                return false
            })
        cache.store(APIRawResponse(statusCode: 200), for: APIResponseCache.Key(method: "GET", url: "https://a.test/x"))
        cache.removeAll()
        var info = stat()
        #expect(stat(target.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o755, "the target's mode is untouched")
        #expect(FileManager.default.fileExists(atPath: planted.path), "nothing in the target is deleted")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: target.path))?.count == 1)
    }

    /// A process killed while a file is written behind leaves its temporary file: opening the cache
    /// and `removeAll()` remove such files, which no index counts against the budget.
    @Test func temporaryFilesOfKilledWritesAreRemovedOnOpenAndByRemoveAll() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let leftover = directory.url.appendingPathComponent(".tmp-\(UUID().uuidString)")
        try Data(repeating: 7, count: 4096).write(to: leftover)
        let unrelated = directory.url.appendingPathComponent("notes.txt")
        try Data("keep".utf8).write(to: unrelated)
        let cache = APIResponseCache(disk: .init(directory: directory.url))
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
        #expect(FileManager.default.fileExists(atPath: unrelated.path))

        let later = directory.url.appendingPathComponent(".tmp-\(UUID().uuidString)")
        try Data(repeating: 7, count: 4096).write(to: later)
        cache.removeAll()
        #expect(!FileManager.default.fileExists(atPath: later.path))
        #expect(FileManager.default.fileExists(atPath: unrelated.path))
    }

    /// Needs root to give the directory away; CI and the development machines run as root.
    @Test(.enabled(if: geteuid() == 0, "needs root to chown a directory to another user"))
    func aDirectoryOwnedByAnotherUserIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        #expect(chown(directory.url.path, 65_534, 65_534) == 0)
        #expect(chmod(directory.url.path, 0o777) == 0)
        let log = CacheEventLog()
        let cache = APIResponseCache(disk: .init(directory: directory.url), eventHandler: log.handler)
        #expect(!cache.hasDiskTier)
        #expect(
            log.all.contains { event in
                if case .diskUnavailable(let reason) = event { return reason.contains("another user") }
                return false
            })
    }

    @Test func anOwnDirectoryOpenToOthersIsMadeOwnerOnly() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        #expect(chmod(directory.url.path, 0o777) == 0)
        let cache = APIResponseCache(disk: .init(directory: directory.url))
        #expect(cache.hasDiskTier)
        var info = stat()
        #expect(stat(directory.url.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
    }

    /// A cache file whose date is replaced by `date` (checksum recomputed, so only the date is wrong)
    /// is a damaged file, removed, and a miss.
    @Test(arguments: [Double.nan, .infinity, -.infinity, -1, 1e300])
    func aForgedDateInACacheFileIsADamagedFile(date: Double) throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let clock = TestClock()
        let key = APIResponseCache.Key(method: "GET", url: "https://a.test/forged")
        let writer = APIResponseCache(memoryBudget: 0, disk: .init(directory: directory.url), clock: clock)
        writer.store(APIRawResponse(statusCode: 200, body: Data("{}".utf8)), for: key)
        let file = try #require(directory.cacheFiles.first)
        var bytes = [UInt8](try Data(contentsOf: file))
        let original = withUnsafeBytes(of: clock.date.timeIntervalSince1970.bitPattern.bigEndian) { Array($0) }
        let forged = withUnsafeBytes(of: date.bitPattern.bigEndian) { Array($0) }
        let range = try #require(bytes.firstRange(of: original))
        bytes.replaceSubrange(range, with: forged)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes.dropLast(8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        bytes.replaceSubrange((bytes.count - 8)..., with: withUnsafeBytes(of: hash.bigEndian) { Array($0) })
        try Data(bytes).write(to: file)

        let log = CacheEventLog()
        let reader = APIResponseCache(
            memoryBudget: 0, disk: .init(directory: directory.url, warmsMemory: false), clock: clock,
            eventHandler: log.handler)
        #expect(reader.entry(for: key) == nil)
        #expect(log.all.contains { if case .removedDamagedFile = $0 { return true } else { return false } })
        #expect(directory.cacheFiles.isEmpty)
    }

    @Test func authenticatedResponsesWithoutAPartitionAreKeptPerCredential() {
        let h = CacheHarness()
        h.transport.stub(
            nil, "/me",
            handler: { request in
                .json(#"{"value":"\#(request.value(forHTTPHeaderField: "X-Auth-Token") ?? "nobody")"}"#)
            })
        func send(_ token: String, _ option: APIResponseCache.Option) -> APITask<TestRequest> {
            h.send("/me", option) {
                $0.headers = ["X-Auth-Token": token]
                $0.cachesAuthenticatedResponses = true
            }
        }
        #expect(send("alice", .networkOnly).state.name == "finished")
        // Bob asks for the cached copy: Alice's is not his, so his comes from the network.
        let bob = send("bob", .cacheOnly)
        #expect(bob.responseSource == .network)
        #expect(h.transport.records.count == 2)
        let alice = send("alice", .cacheOnly)
        #expect(alice.responseSource == .cache)
        #expect(h.transport.records.count == 2)
        // The partition is a digest: the token never appears in the stored key.
        for file in h.directory.cacheFiles {
            let text = String(decoding: (try? Data(contentsOf: file)) ?? Data(), as: UTF8.self)
            #expect(!text.contains("alice") || text.contains(#"{"value":"alice"}"#))
            #expect(text.contains("credential:"))
        }
    }

    @Test func aCustomTokenHeaderCountsAsACredentialForTheCache() {
        let h = CacheHarness()
        h.transport.stub(nil, "/me", .json(#"{"value":"mine"}"#))
        h.send("/me", .networkOnly) { $0.headers = ["X-Auth-Token": "t"] }
        #expect(h.log.all.contains { if case .notStored = $0 { return true } else { return false } })
    }
}
