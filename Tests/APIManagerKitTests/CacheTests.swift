import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A fresh directory under the system's temporary directory, removed by `cleanUp()`.
struct TemporaryDirectory {
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("APIManagerKitTests-\(UUID().uuidString)", isDirectory: true)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: url) }

    var cacheFiles: [URL] {
        ((try? FileManager.default.contentsOfDirectory(at: url, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "apicache" }
    }
}

/// Collects cache events.
final class CacheEventLog: @unchecked Sendable {
    // @unchecked: `events` is only touched under `lock`.
    private let lock = NSLock()
    private var events: [APIResponseCache.Event] = []
    var all: [APIResponseCache.Event] { lock.withLock { events } }
    func record(_ event: APIResponseCache.Event) { lock.withLock { events.append(event) } }
    var handler: @Sendable (APIResponseCache.Event) -> Void { { [self] in record($0) } }
}

/// A manager with a memory and disk cache in a temporary directory, on a virtual clock.
final class CacheHarness: @unchecked Sendable {
    // @unchecked: immutable references to thread-safe objects.
    let clock = TestClock()
    let transport: MockTransport
    let directory = TemporaryDirectory()
    let log = CacheEventLog()
    let cache: APIResponseCache
    let manager: TestManager
    let recorder = EventRecorder()

    init(memoryBudget: Int = 1 << 20, diskBudget: Int = 50 << 20, hasher: APIResponseCache.KeyHasher = .fnv1a) {
        transport = MockTransport(clock: clock)
        cache = APIResponseCache(
            memoryBudget: memoryBudget, disk: .init(directory: directory.url, budget: diskBudget), clock: clock,
            hasher: hasher, eventHandler: log.handler)
        manager = TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, cache: cache))
        manager.delegate = recorder
    }

    /// Another cache on the same directory, as a second process or manager would have.
    func secondCache(warmsMemory: Bool = false, log: CacheEventLog? = nil) -> APIResponseCache {
        APIResponseCache(
            disk: .init(directory: directory.url, warmsMemory: warmsMemory), clock: clock,
            eventHandler: log?.handler)
    }

    @discardableResult
    func send(_ path: String, _ option: APIResponseCache.Option, configure: (inout TestRequest) -> Void = { _ in })
        -> APITask<TestRequest>
    {
        var request = TestRequest(path)
        request.cacheOption = option
        configure(&request)
        return manager.send(request)
    }

    func key(_ path: String, partition: String? = nil) -> APIResponseCache.Key {
        APIResponseCache.Key(
            method: "GET", url: testBaseURL.appendingPathComponent(path).absoluteString, partition: partition ?? "")
    }

    deinit { directory.cleanUp() }
}

@Suite("Response cache", .timeLimit(.minutes(1)))
struct CacheTests {
    // MARK: Options

    @Test func networkOnlyNeverReadsTheCacheButStoresTheResponse() {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"one"}"#), .json(#"{"value":"two"}"#))
        h.send("/feed", .networkOnly)
        h.send("/feed", .networkOnly)
        #expect(h.transport.records.count == 2)
        #expect(h.cache.entry(for: h.key("feed"))?.response.body == Data(#"{"value":"two"}"#.utf8))
    }

    @Test func shouldSaveInCacheFalseStoresNothing() {
        let h = CacheHarness()
        h.transport.stub(nil, "/login", .json("{}"))
        h.send("/login", .networkOnly) { $0.shouldSaveInCache = false }
        #expect(h.cache.entry(for: h.key("login")) == nil)
        #expect(h.log.all.contains { if case .notStored = $0 { return true } else { return false } })
    }

    @Test func aResponseMarkedNoStoreIsNotStored() {
        let h = CacheHarness()
        h.transport.stub(nil, "/secret", .json("{}", headers: ["Cache-Control": "private, no-store"]))
        h.send("/secret", .networkOnly)
        #expect(h.cache.entry(for: h.key("secret")) == nil)
    }

    @Test func cacheOnlyServesAStoredResponseWithoutSendingAnything() {
        let h = CacheHarness()
        h.transport.stub(nil, "/profile", .json(#"{"value":"stored"}"#))
        let first = h.send("/profile", .cacheOnly)
        #expect(first.responseSource == .network)
        let second = h.send("/profile", .cacheOnly)
        #expect(second.state.name == "finished")
        #expect(second.responseSource == .cache)
        #expect(h.transport.records.count == 1)
        #expect(h.recorder.events(of: second) == ["start 1", "finished"])
    }

    @Test func bothDeliversTheCachedCopyThenTheNetworkResponseAndEndsOnce() async throws {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"old"}"#), .json(#"{"value":"new"}"#))
        h.send("/feed", .networkOnly)
        var request = TestRequest("/feed")
        request.cacheOption = .both
        var received: [String] = []
        for try await delivery in h.manager.responses(for: request) {
            received.append("\(delivery.source):\(delivery.response.value ?? "")")
        }
        #expect(received == ["cache:old", "network:new"])
        let task = h.send("/feed", .both)
        #expect(h.recorder.events(of: task) == ["start 1", "cached", "finished"])
        #expect(task.responseSource == .network)
    }

    @Test func bothStillDeliversTheNetworkFailureAfterTheCachedCopy() async {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"old"}"#), .failure(.notConnectedToInternet))
        h.send("/feed", .networkOnly)
        var request = TestRequest("/feed")
        request.cacheOption = .both
        var received: [APIResponseCache.Source] = []
        var failure: APIError?
        do {
            for try await delivery in h.manager.responses(for: request) { received.append(delivery.source) }
        } catch {
            failure = error as? APIError
        }
        #expect(received == [.cache])
        #expect((failure?.underlyingError as? URLError)?.code == .notConnectedToInternet)
        let task = h.send("/feed", .both)
        #expect(
            h.recorder.events(of: task) == [
                "start 1", "cached", "failed transport(\(URLError.notConnectedToInternet.rawValue))",
            ])
    }

    @Test func bothWithoutAStoredCopyIsJustTheNetwork() {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json("{}"))
        let task = h.send("/feed", .both)
        #expect(h.recorder.events(of: task) == ["start 1", "finished"])
    }

    @Test func freshUsesTheCacheWhileYoungThenRevalidatesAndA304DeliversTheStoredBody() {
        let h = CacheHarness()
        h.transport.stub(
            nil, "/article",
            .json(#"{"value":"v1"}"#, headers: ["ETag": "\"abc\"", "Last-Modified": "Tue, 14 Nov 2023 22:00:00 GMT"]),
            .status(304, headers: ["ETag": "\"abc\""]))
        h.send("/article", .fresh(maxAge: 60))
        let young = h.send("/article", .fresh(maxAge: 60))
        #expect(young.responseSource == .cache)
        #expect(h.transport.records.count == 1)

        h.clock.advance(by: 61)
        let stale = h.send("/article", .fresh(maxAge: 60))
        #expect(h.transport.records.count == 2)
        let conditional = h.transport.requests[1]
        #expect(conditional.value(forHTTPHeaderField: "If-None-Match") == "\"abc\"")
        #expect(conditional.value(forHTTPHeaderField: "If-Modified-Since") == "Tue, 14 Nov 2023 22:00:00 GMT")
        #expect(stale.state.name == "finished")
        #expect(stale.responseSource == .revalidated)
        // The 304 refreshed the entry: young again.
        let refreshed = h.send("/article", .fresh(maxAge: 60))
        #expect(refreshed.responseSource == .cache)
        #expect(h.transport.records.count == 2)
    }

    @Test func anEngineWithoutACacheSendsEveryOptionToTheNetwork() {
        let h = Harness()
        var request = TestRequest("/ok")
        request.cacheOption = .cacheOnly
        h.send(request)
        h.send(request)
        #expect(h.transport.records.count == 2)
    }

    // MARK: Keys

    @Test func keysSeparateQueriesBaseURLsBodiesMethodsAndPartitions() {
        let cache = APIResponseCache(disk: nil)
        let base = APIResponseCache.Key(method: "GET", url: "https://a.test/items?page=1")
        cache.store(APIRawResponse(statusCode: 200, body: Data("page 1".utf8)), for: base)
        let others = [
            APIResponseCache.Key(method: "GET", url: "https://a.test/items?page=2"),
            APIResponseCache.Key(method: "GET", url: "https://b.test/items?page=1"),
            APIResponseCache.Key(method: "POST", url: "https://a.test/items?page=1"),
            APIResponseCache.Key(method: "GET", url: "https://a.test/items?page=1", bodyDigest: "ff"),
            APIResponseCache.Key(method: "GET", url: "https://a.test/items?page=1", partition: "alice"),
        ]
        for key in others { #expect(cache.entry(for: key) == nil, "\(key)") }
        #expect(cache.entry(for: base)?.response.body == Data("page 1".utf8))
    }

    @Test func aRequestKeyDigestsItsBody() {
        var one = URLRequest(url: testBaseURL)
        one.httpMethod = "POST"
        one.httpBody = Data("a".utf8)
        var two = one
        two.httpBody = Data("b".utf8)
        #expect(APIResponseCache.Key(request: one) != APIResponseCache.Key(request: two))
        #expect(
            APIResponseCache.Key(request: one).bodyDigest
                == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb")
    }

    @Test func oneUsersResponseIsNeverServedToAnother() {
        let h = CacheHarness()
        h.transport.stub(nil, "/me", .json(#"{"value":"alice"}"#), .json(#"{"value":"bob"}"#))
        h.send("/me", .networkOnly) { $0.cachePartition = "alice" }
        let bob = h.send("/me", .cacheOnly) { $0.cachePartition = "bob" }
        #expect(bob.responseSource == .network)
        #expect(h.transport.records.count == 2)
    }

    @Test(arguments: [APIResponseCache.Event.Tier.memory, .disk])
    func aForcedHashCollisionIsAMissNeverAWrongAnswer(tier: APIResponseCache.Event.Tier) {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let log = CacheEventLog()
        let everythingCollides = APIResponseCache.KeyHasher.custom { _ in "same-slot" }
        let writer = APIResponseCache(disk: .init(directory: directory.url), hasher: everythingCollides)
        let a = APIResponseCache.Key(method: "GET", url: "https://a.test/a")
        let b = APIResponseCache.Key(method: "GET", url: "https://a.test/b")
        writer.store(APIRawResponse(statusCode: 200, body: Data("A".utf8)), for: a)
        let reader =
            tier == .memory
            ? writer
            : APIResponseCache(disk: .init(directory: directory.url, warmsMemory: false), hasher: everythingCollides)
        reader.eventHandler = log.handler
        #expect(reader.entry(for: b) == nil)
        #expect(log.all.contains(.collision(b)))
        #expect(reader.entry(for: a)?.response.body == Data("A".utf8))
    }

    // MARK: The authenticated-response rule

    @Test func responsesToRequestsWithCredentialsAreNotStoredUnlessTheRequestOptsIn() {
        let h = CacheHarness()
        h.transport.stub(nil, "/account", .json("{}"))
        h.send("/account", .networkOnly) { $0.headers = ["Authorization": "Bearer secret"] }
        #expect(h.cache.entry(for: h.key("account")) == nil)
        h.send("/account", .networkOnly) { $0.headers = ["Cookie": "session=1"] }
        #expect(h.cache.entry(for: h.key("account")) == nil)
        h.send("/account", .networkOnly) {
            $0.headers = ["Authorization": "Bearer secret"]
            $0.cachesAuthenticatedResponses = true
            $0.cachePartition = "alice"
        }
        #expect(h.cache.entry(for: h.key("account", partition: "alice")) != nil)
    }

    // MARK: Memory tier

    @Test func theMemoryTierKeepsTheMostUsedEntriesWithRecencyBreakingTies() {
        let body = Data(repeating: 0x61, count: 1_000)
        let keys = (0..<4).map { APIResponseCache.Key(method: "GET", url: "https://a.test/\($0)") }
        // Room for three entries, not four.
        let log = CacheEventLog()
        let cache = APIResponseCache(memoryBudget: 3_300, disk: nil, eventHandler: log.handler)
        for key in keys.prefix(3) { cache.store(APIRawResponse(statusCode: 200, body: body), for: key) }
        _ = cache.entry(for: keys[0])
        _ = cache.entry(for: keys[0])
        _ = cache.entry(for: keys[2])
        _ = cache.entry(for: keys[1])  // 1 and 2 used once each; 2 less recently
        cache.store(APIRawResponse(statusCode: 200, body: body), for: keys[3])
        #expect(log.all.contains(.evicted(keys[2])))
        #expect(cache.memoryCount == 3)
        #expect(cache.entry(for: keys[2]) == nil)
        #expect(cache.entry(for: keys[0]) != nil)
        #expect(cache.entry(for: keys[1]) != nil)
        #expect(cache.memoryUsage <= 3_300)
    }

    @Test func anEntryLargerThanTheMemoryBudgetIsNotKeptInMemory() {
        let cache = APIResponseCache(memoryBudget: 100, disk: nil)
        let key = APIResponseCache.Key(method: "GET", url: "https://a.test/big")
        cache.store(APIRawResponse(statusCode: 200, body: Data(count: 1_000)), for: key)
        #expect(cache.memoryCount == 0)
        #expect(cache.entry(for: key) == nil)
    }

    // MARK: Disk tier

    @Test func theDiskTierIsOwnerOnlyAndSurvivesANewInstance() throws {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"kept"}"#))
        h.send("/feed", .networkOnly)
        let attributes = try FileManager.default.attributesOfItem(atPath: h.directory.url.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        let file = try #require(h.directory.cacheFiles.first)
        let fileAttributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((fileAttributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let second = h.secondCache()
        #expect(second.entry(for: h.key("feed"))?.response.body == Data(#"{"value":"kept"}"#.utf8))
    }

    @Test func aWarmStartLoadsTheNewestFilesIntoMemory() {
        let h = CacheHarness()
        for index in 0..<20 {
            h.cache.store(APIRawResponse(statusCode: 200, body: Data("\(index)".utf8)), for: h.key("item/\(index)"))
        }
        let warm = h.secondCache(warmsMemory: true)
        #expect(warm.memoryCount == 20)
        #expect(warm.diskUsage > 0)
    }

    @Test(arguments: ["flip a byte", "truncate", "foreign file", "empty file"])
    func aDamagedFileIsAMissAndIsRemoved(damage: String) throws {
        let h = CacheHarness()
        let key = h.key("feed")
        h.cache.store(APIRawResponse(statusCode: 200, body: Data(repeating: 0x62, count: 300)), for: key)
        let file = try #require(h.directory.cacheFiles.first)
        var bytes = try Data(contentsOf: file)
        switch damage {
        case "flip a byte": bytes[bytes.count / 2] ^= 0xff
        case "truncate": bytes = bytes.prefix(bytes.count - 20)
        case "foreign file": bytes = Data("<html>not ours</html>".utf8)
        default: bytes = Data()
        }
        try bytes.write(to: file)
        let log = CacheEventLog()
        let reader = h.secondCache(log: log)
        #expect(reader.entry(for: key) == nil)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(log.all.contains { if case .removedDamagedFile = $0 { return true } else { return false } })
    }

    @Test func cacheOnlyWithADamagedFileStillCallsBackFromTheNetwork() throws {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"fresh"}"#))
        h.cache.store(APIRawResponse(statusCode: 200, body: Data("{}".utf8)), for: h.key("feed"))
        let file = try #require(h.directory.cacheFiles.first)
        try Data("garbage".utf8).write(to: file)
        let manager = TestManager(
            engine: APIEngine(
                transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline, cache: h.secondCache()
            ))
        var request = TestRequest("/feed")
        request.cacheOption = .cacheOnly
        let task = manager.send(request)
        #expect(task.state.name == "finished")
        #expect(task.responseSource == .network)
    }

    @Test func aStoredResponseThatNoLongerDecodesIsDroppedAndFetchedAgain() {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"fresh"}"#))
        h.cache.store(APIRawResponse(statusCode: 200, body: Data("not json".utf8)), for: h.key("feed"))
        let task = h.send("/feed", .cacheOnly)
        #expect(task.responseSource == .network)
        #expect(h.cache.entry(for: h.key("feed"))?.response.body == Data(#"{"value":"fresh"}"#.utf8))
    }

    @Test func entriesOlderThanTheDiskMaxAgeExpire() {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let clock = TestClock()
        let log = CacheEventLog()
        let cache = APIResponseCache(
            memoryBudget: 0, disk: .init(directory: directory.url, maxAge: 3_600), clock: clock,
            eventHandler: log.handler)
        let key = APIResponseCache.Key(method: "GET", url: "https://a.test/old")
        cache.store(APIRawResponse(statusCode: 200), for: key)
        clock.advance(by: 3_601)
        #expect(cache.entry(for: key) == nil)
        #expect(log.all.contains(.expired(key)))
        #expect(directory.cacheFiles.isEmpty)
    }

    @Test func theDiskBudgetEvictsTheLeastRecentlyUsedFiles() {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let clock = TestClock()
        let cache = APIResponseCache(
            memoryBudget: 0, disk: .init(directory: directory.url, budget: 3_500), clock: clock)
        let keys = (0..<4).map { APIResponseCache.Key(method: "GET", url: "https://a.test/\($0)") }
        for key in keys.prefix(3) {
            cache.store(APIRawResponse(statusCode: 200, body: Data(count: 1_000)), for: key)
            clock.advance(by: 1)
        }
        _ = cache.entry(for: keys[0])  // 0 is now the most recently used
        clock.advance(by: 1)
        cache.store(APIRawResponse(statusCode: 200, body: Data(count: 1_000)), for: keys[3])
        #expect(cache.entry(for: keys[1]) == nil)
        #expect(cache.entry(for: keys[0]) != nil)
        #expect(cache.entry(for: keys[3]) != nil)
        #expect(cache.diskUsage <= 3_500)
    }

    @Test func anUnusableDirectoryDegradesToMemoryOnlyWithAnEvent() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        let blocker = directory.url.appendingPathComponent("file")
        try Data("x".utf8).write(to: blocker)
        let log = CacheEventLog()
        let cache = APIResponseCache(
            disk: .init(directory: blocker.appendingPathComponent("cache")), eventHandler: log.handler)
        #expect(!cache.hasDiskTier)
        #expect(log.all.contains { if case .diskUnavailable = $0 { return true } else { return false } })
        let key = APIResponseCache.Key(method: "GET", url: "https://a.test/x")
        cache.store(APIRawResponse(statusCode: 200), for: key)
        #expect(cache.entry(for: key) != nil)
    }

    @Test func aDiskThatFailsLaterDegradesToMemoryOnlyWithAnEvent() throws {
        let h = CacheHarness()
        // Replace the directory with a file: every later write fails.
        try FileManager.default.removeItem(at: h.directory.url)
        try Data("x".utf8).write(to: h.directory.url)
        let key = h.key("x")
        h.cache.store(APIRawResponse(statusCode: 200), for: key)
        #expect(!h.cache.hasDiskTier)
        #expect(h.log.all.contains { if case .diskUnavailable = $0 { return true } else { return false } })
        #expect(h.cache.entry(for: key) != nil)
        h.cache.store(APIRawResponse(statusCode: 201), for: key)
        #expect(h.cache.entry(for: key)?.response.statusCode == 201)
    }

    @Test func removeForAndRemoveAllEmptyBothTiers() {
        let h = CacheHarness()
        h.cache.store(APIRawResponse(statusCode: 200), for: h.key("a"))
        h.cache.store(APIRawResponse(statusCode: 200), for: h.key("b"))
        h.cache.remove(for: h.key("a"))
        #expect(h.cache.entry(for: h.key("a")) == nil)
        #expect(h.secondCache().entry(for: h.key("a")) == nil)
        #expect(h.directory.cacheFiles.count == 1)
        h.cache.removeAll()
        #expect(h.cache.entry(for: h.key("b")) == nil)
        #expect(h.directory.cacheFiles.isEmpty)
        #expect(h.cache.memoryUsage == 0)
    }

    // MARK: Sharing and concurrency

    @Test func twoManagersSharingOneDirectoryReadEachOthersEntries() {
        let h = CacheHarness()
        h.transport.stub(nil, "/shared", .json(#"{"value":"from A"}"#))
        h.send("/shared", .networkOnly)
        let other = TestManager(
            engine: APIEngine(
                transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline, cache: h.secondCache()
            ))
        var request = TestRequest("/shared")
        request.cacheOption = .cacheOnly
        let task = other.send(request)
        #expect(task.responseSource == .cache)
        #expect(h.transport.records.count == 1)
    }

    @Test func concurrentReadersAndWritersNeverSeeAWrongOrTornEntry() {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let first = APIResponseCache(memoryBudget: 4_000, disk: .init(directory: directory.url))
        let second = APIResponseCache(memoryBudget: 4_000, disk: .init(directory: directory.url, warmsMemory: false))
        let keys = (0..<16).map { APIResponseCache.Key(method: "GET", url: "https://a.test/\($0)") }
        @Sendable func body(_ index: Int, _ version: Int) -> Data {
            Data("\(index):\(version):".utf8) + Data(count: 500)
        }
        let problems = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            let cache = thread.isMultiple(of: 2) ? first : second
            for round in 0..<150 {
                let index = (round * 7 + thread) % keys.count
                if (round + thread).isMultiple(of: 3) {
                    cache.store(APIRawResponse(statusCode: 200, body: body(index, round)), for: keys[index])
                } else if let entry = cache.entry(for: keys[index]) {
                    let prefix = "\(index):"
                    if entry.key != keys[index] || !entry.response.body.starts(with: Data(prefix.utf8))
                        || entry.response.body.suffix(500) != Data(count: 500)
                    {
                        problems.withLock { $0.append("\(keys[index]) read \(entry.key)") }
                    }
                }
            }
        }
        #expect(problems.withLock { $0 }.isEmpty)
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? [])
            .filter { $0.hasPrefix(".tmp") }
        #expect(leftovers.isEmpty)
    }
}
