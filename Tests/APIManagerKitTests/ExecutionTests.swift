import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where an engine with `execution: .queue(…)` does its work.
@Suite("Execution on the work queue", .timeLimit(.minutes(1)))
struct ExecutionTests {
    static let marker = DispatchSpecificKey<String>()

    /// A manager that records on which queue its hooks ran, and can hold its response build until
    /// another task's has started too.
    final class Recording: APIManager, @unchecked Sendable {
        // @unchecked: `log` is a Locked; the rest is immutable.
        typealias Request = TestRequest
        typealias Response = Echo
        let engine: APIEngine
        let log = Locked<[String]>([])
        let rendezvous: DispatchGroup?

        init(engine: APIEngine, rendezvous: DispatchGroup? = nil) {
            self.engine = engine
            self.rendezvous = rendezvous
        }

        func urlRequest(for task: APITask<TestRequest>) throws -> URLRequest {
            log.withLock { $0.append("build on \(DispatchQueue.getSpecific(key: ExecutionTests.marker) ?? "caller")") }
            return try task.request.makeURLRequest()
        }

        func response(for task: APITask<TestRequest>, from raw: APIRawResponse) throws -> Echo {
            log.withLock { $0.append("decode on \(DispatchQueue.getSpecific(key: ExecutionTests.marker) ?? "caller")") }
            if let rendezvous {
                // Both builds must be running at once for either to go on.
                rendezvous.leave()
                guard rendezvous.wait(timeout: .now() + 10) == .success else { throw CancellationError() }
            }
            return try JSONDecoder().decode(Echo.self, from: raw.body)
        }
    }

    private static func workQueue() -> DispatchQueue {
        let queue = DispatchQueue(label: "execution-tests.work", attributes: .concurrent)
        queue.setSpecific(key: marker, value: "work queue")
        return queue
    }

    @Test func sendReturnsBeforeTheRequestIsBuiltAndEverythingRunsOnTheWorkQueue() async throws {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let manager = Recording(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .queue(Self.workQueue())))
        let echo = try await manager.response(for: TestRequest("/ok"))
        #expect(echo.value == "ok")
        #expect(manager.log.withLock { $0 } == ["build on work queue", "decode on work queue"])
    }

    @Test func anInlineEngineWorksOnTheCallersThread() {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let manager = Recording(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/ok"))
        #expect(task.state.name == "finished")
        #expect(manager.log.withLock { $0 } == ["build on caller", "decode on caller"])
    }

    /// Two responses are built at the same time: each build waits until the other has started,
    /// which only a concurrent queue allows (on one thread, the first would wait forever).
    @Test(.enabled(if: ProcessInfo.processInfo.activeProcessorCount >= 2, "needs two cores"))
    func responsesOfDifferentTasksAreBuiltInParallel() async throws {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let rendezvous = DispatchGroup()
        rendezvous.enter()
        rendezvous.enter()
        let manager = Recording(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .queue(Self.workQueue())),
            rendezvous: rendezvous)
        async let first = manager.response(for: TestRequest("/ok"))
        async let second = manager.response(for: TestRequest("/ok"))
        let values = try await [first.value, second.value]
        #expect(values == ["ok", "ok"])
    }

    @Test func aCancelledTaskIsNeverSentWhenItsStartWasAlreadyQueued() async {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let queue = Self.workQueue()
        let gate = DispatchSemaphore(value: 0)
        queue.async(flags: .barrier) { gate.wait() }  // holds the queue until the task is cancelled
        let manager = Recording(engine: APIEngine(transport: transport, delivery: .inline, execution: .queue(queue)))
        let task = manager.send(TestRequest("/ok"))
        task.cancel()
        gate.signal()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async(flags: .barrier) { continuation.resume() }
        }
        #expect(task.state.name == "cancelled(explicit)")
        #expect(transport.records.isEmpty)
        #expect(manager.log.withLock { $0 }.isEmpty, "its request was not even built")
    }

    /// The default lanes: each task's build and decode run on one lane (in order), and different
    /// tasks spread over the lanes.
    @Test func eachTaskRunsOnOneLaneAndTasksSpreadOverTheLanes() async throws {
        let lanes = APIEngine.WorkLanes(label: "execution-tests.lanes", count: 2)
        for (number, queue) in lanes.queues.enumerated() {
            queue.setSpecific(key: ExecutionTests.marker, value: "lane \(number)")
        }
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let manager = ExecutionTests.Recording(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .lanes(lanes)))
        for _ in 0..<4 {
            #expect(try await manager.response(for: TestRequest("/ok")).value == "ok")
        }
        let log = manager.log.withLock { $0 }
        #expect(log.count == 8)
        // Each task: a build then a decode, on the same lane; the four tasks alternate lanes.
        let lanesUsed = stride(from: 0, to: log.count, by: 2).map { index -> String in
            let build = log[index].replacingOccurrences(of: "build on ", with: "")
            #expect(log[index + 1] == "decode on \(build)")
            return build
        }
        #expect(Set(lanesUsed) == ["lane 0", "lane 1"])
        #expect(
            lanesUsed == ["lane 1", "lane 0", "lane 1", "lane 0"]
                || lanesUsed == ["lane 0", "lane 1", "lane 0", "lane 1"])
    }

}

/// The cache store stage on a work queue writes its file after the task ends (write behind).
@Suite("Write-behind cache stores", .timeLimit(.minutes(1)))
struct WriteBehindTests {
    /// A memory budget of 0, so only the disk (or the pending write) can answer.
    private func makeManager(_ directory: TemporaryDirectory) -> (TestManager, MockTransport, APIResponseCache) {
        let transport = MockTransport()
        transport.stub(nil, "/feed", .json(#"{"value":"fresh"}"#), .json(#"{"value":"second"}"#))
        let cache = APIResponseCache(memoryBudget: 0, disk: .init(directory: directory.url))
        let queue = DispatchQueue(label: "write-behind.work", attributes: .concurrent)
        let manager = TestManager(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .queue(queue), cache: cache))
        return (manager, transport, cache)
    }

    @Test func aReadAfterTheTaskEndedSeesTheStoreEvenBeforeItsFileIsWritten() async throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let (manager, transport, cache) = makeManager(directory)
        _ = try await manager.response(for: TestRequest("/feed"))
        let key = APIResponseCache.Key(method: "GET", url: "https://api.test/feed")
        #expect(cache.entry(for: key)?.response.body == Data(#"{"value":"fresh"}"#.utf8))
        var cached = TestRequest("/feed")
        cached.cacheOption = .cacheOnly
        #expect(try await manager.response(for: cached).value == "fresh")
        #expect(transport.records.count == 1)
    }

    @Test func aRemoveAfterAWriteBehindStoreIsTheLastWord() async throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let (manager, _, cache) = makeManager(directory)
        _ = try await manager.response(for: TestRequest("/feed"))
        let key = APIResponseCache.Key(method: "GET", url: "https://api.test/feed")
        cache.remove(for: key)
        #expect(cache.entry(for: key) == nil)
        #expect(directory.cacheFiles.isEmpty, "the queued write ran before the removal, not after")
    }

    @Test func theFileIsWrittenBehindTheTask() async throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanUp() }
        let (manager, _, cache) = makeManager(directory)
        _ = try await manager.response(for: TestRequest("/feed"))
        // Removing another key waits for the queued writes: the file of /feed is there by then.
        cache.remove(for: APIResponseCache.Key(method: "GET", url: "https://api.test/other"))
        #expect(directory.cacheFiles.count == 1)
        let reader = APIResponseCache(memoryBudget: 0, disk: .init(directory: directory.url, warmsMemory: false))
        #expect(reader.entry(for: APIResponseCache.Key(method: "GET", url: "https://api.test/feed")) != nil)
    }
}

/// The typed response travels from the response stage to the delegate and the async caller with its
/// type: nothing is erased and cast back, so even managers of different response types sharing one
/// engine each get their own type.
@Suite("Typed end to end", .timeLimit(.minutes(1)))
struct TypedEndToEndTests {
    struct Count: APIResponse, Decodable, Equatable { let count: Int }

    final class CountManager: APIManager {
        typealias Request = TestRequest
        typealias Response = Count
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @Test func managersOfDifferentResponseTypesShareAnEngine() async throws {
        let h = Harness()
        h.transport.stub(nil, "/count", .json(#"{"count":3,"value":"three"}"#))
        let counts = CountManager(engine: h.manager.engine)
        async let echo = h.manager.response(for: TestRequest("/count"))
        async let count = counts.response(for: TestRequest("/count"))
        #expect(try await echo == Echo(value: "three"))
        #expect(try await count == Count(count: 3))
    }

    @Test func aCachedCopyAndTheResponseReachTheStreamTyped() async throws {
        let h = CacheHarness()
        h.transport.stub(nil, "/feed", .json(#"{"value":"old"}"#), .json(#"{"value":"new"}"#))
        h.send("/feed", .networkOnly)
        var request = TestRequest("/feed")
        request.cacheOption = .both
        var received: [APIResponseCache.SourcedResponse<Echo>] = []
        for try await delivery in h.manager.responses(for: request) { received.append(delivery) }
        #expect(received.map(\.response) == [Echo(value: "old"), Echo(value: "new")])
        #expect(received.map(\.source) == [.cache, .network])
    }
}
