import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A cart edit: `durable`, in a scope, with an idempotency key.
func durableEdit(_ path: String, scope: String? = "cart") -> TestRequest {
    var request = TestRequest(path, .durable, scope: scope, method: .post)
    request.idempotencyKey = .standard
    return request
}

/// The files of a scope's folder that end with one of `suffixes` (pending records unless told),
/// sorted.
func recordNames(in folder: URL, scope: String? = "cart", suffixes: [String] = [".task"]) -> [String] {
    let scopeFolder = folder.appendingPathComponent(DurableScopeFolder.folderName(of: scope))
    let names = (try? FileManager.default.contentsOfDirectory(atPath: scopeFolder.path)) ?? []
    return names.filter { name in suffixes.contains { name.hasSuffix($0) } }.sorted()
}

/// The permission bits of a file or folder.
private func permissions(of url: URL) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions]) as? Int
}

/// The restored tasks the manager has in memory, in their line's order.
func restoredTasks(_ h: Harness) -> [APITask<TestRequest>] {
    h.manager.inFlightTasks.filter(\.isRestored).sorted { $0.identifier < $1.identifier }
}

/// A harness whose transport holds every cart edit until released.
private func cartHarness(_ folder: TemporaryFolder, store: APIEngine.DurableStore? = nil) -> Harness {
    let h = Harness(durableStore: store ?? APIEngine.DurableStore(directory: folder.url))
    for path in ["/add", "/update", "/remove", "/a", "/b", "/c"] {
        h.transport.stub(nil, path, MockTransport.Reply.json(#"{"value":"ok"}"#).held())
    }
    return h
}

@Suite("Durable line", .timeLimit(.minutes(1)))
struct DurableLineTests {
    // MARK: Written before it is sent, removed when it ends

    @Test(arguments: ["cart", nil] as [String?])
    func aTaskIsOnDiskBeforeTheTransportSeesItAndGoneWhenItFinishes(scope: String?) throws {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        let seenOnDisk = Locked<[String]?>(nil)
        h.transport.stub(nil, "/add") { _ in
            seenOnDisk.withLock { $0 = recordNames(in: folder.url, scope: scope) }
            return .json(#"{"value":"added"}"#)
        }
        let task = h.send(durableEdit("/add", scope: scope))
        #expect(seenOnDisk.withLock { $0 } == ["00000000000000000001.task"])
        #expect(task.state.name == "finished")
        #expect(recordNames(in: folder.url, scope: scope) == [])
        #expect(h.recorder.events.contains("\(task.identifier) finished"))
    }

    @Test func theFoldersAndRecordsAreTheOwnersOnly() throws {
        let folder = TemporaryFolder()
        let h = cartHarness(folder)
        h.send(durableEdit("/add"))
        let scopeFolder = folder.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
        #expect(permissions(of: folder.url) == 0o700)
        #expect(permissions(of: scopeFolder) == 0o700)
        #expect(permissions(of: scopeFolder.appendingPathComponent("set-aside")) == 0o700)
        #expect(permissions(of: scopeFolder.appendingPathComponent("00000000000000000001.task")) == 0o600)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scopeFolder.path)
            .filter { $0.hasPrefix(".tmp-") }
        #expect(leftovers == [])
    }

    @Test func aRecordGoesWhenItsTaskFailsOrIsCancelledWaitingOrRunning() throws {
        let folder = TemporaryFolder()
        let h = cartHarness(folder)
        h.transport.stub(nil, "/gone", .status(410))
        let first = h.send(durableEdit("/add"))
        let waiting = h.send(durableEdit("/update"))
        let third = h.send(durableEdit("/remove"))
        #expect(recordNames(in: folder.url).count == 3)
        waiting.cancel()
        #expect(recordNames(in: folder.url) == ["00000000000000000001.task", "00000000000000000003.task"])
        first.cancel()
        #expect(recordNames(in: folder.url) == ["00000000000000000003.task"])
        #expect(third.state.name == "running")
        h.transport.release(path: "/remove", with: .status(410))
        #expect(third.state.name == "status(410)")
        #expect(recordNames(in: folder.url) == [])
    }

    @Test func anAsyncCallersTaskRemovesItsRecordWhenItReturns() async throws {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        h.transport.stub(nil, "/add", .json(#"{"value":"added"}"#))
        let response = try await h.manager.response(for: durableEdit("/add"))
        #expect(response.value == "added")
        #expect(recordNames(in: folder.url) == [])
    }

    // MARK: Replay

    @Test(arguments: ["cart", nil] as [String?])
    func aRelaunchReplaysThePendingTasksInOrderWithTheirKeysAndThenRemovesThem(scope: String?) throws {
        let folder = TemporaryFolder()
        var keys: [String?] = []
        weak var firstStore: APIEngine.DurableStore?
        do {
            let store = APIEngine.DurableStore(directory: folder.url)
            firstStore = store
            let h = cartHarness(folder, store: store)
            keys = ["/add", "/update", "/remove"].map { h.send(durableEdit($0, scope: scope)).idempotencyKey }
            #expect(h.transport.records.map(\.path) == ["/add"])
        }
        // The first run is gone (its engine released, its tasks never ended): its records stay.
        #expect(firstStore == nil)
        #expect(recordNames(in: folder.url, scope: scope).count == 3)

        let h = cartHarness(folder)
        let replay = try h.manager.replayDurableTasks(inScope: scope)
        #expect(replay.setAside.isEmpty)
        #expect(replay.count == 3)
        let tasks = restoredTasks(h)
        #expect(tasks.map(\.request.path) == ["/add", "/update", "/remove"])
        #expect(tasks.map(\.idempotencyKey) == keys)
        #expect(tasks.map(\.state.name) == ["running", "waiting", "waiting"])
        h.transport.releaseAll()
        h.transport.releaseAll()
        h.transport.releaseAll()
        #expect(h.transport.records.map(\.path) == ["/add", "/update", "/remove"])
        #expect(h.transport.records.map { $0.request.value(forHTTPHeaderField: "Idempotency-Key") } == keys)
        #expect(tasks.map(\.state.name) == ["finished", "finished", "finished"])
        #expect(recordNames(in: folder.url, scope: scope) == [])
        // Replaying an open scope again sends nothing more.
        #expect(try h.manager.replayDurableTasks(inScope: scope).count == 0)
    }

    @Test func theReplaysOutcomesTellHowEachRestoredTaskEndedInOrderThenFinish() async throws {
        let folder = TemporaryFolder()
        do {
            let h = cartHarness(folder)
            for path in ["/add", "/update", "/remove"] { h.send(durableEdit(path)) }
        }
        let h = cartHarness(folder)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        h.transport.release(path: "/add")
        h.transport.release(path: "/update", with: .status(410))
        h.transport.release(path: "/remove")
        var seen: [String] = []
        for await outcome in replay.outcomes {
            switch outcome.result {
            case .success(let echo): seen.append("\(outcome.task.request.path) \(echo.value ?? "-")")
            case .failure(let error): seen.append("\(outcome.task.request.path) \(describe(error))")
            }
        }
        #expect(seen == ["/add ok", "/update status(410)", "/remove ok"])
        // The delegate was told too, and a replay with nothing to restore finishes at once.
        #expect(h.recorder.events.filter { $0.hasSuffix(" finished") }.count == 2)
        var nothing = 0
        for await _ in try h.manager.replayDurableTasks(inScope: "wishlist").outcomes { nothing += 1 }
        #expect(nothing == 0)
    }

    @Test func theFirstNewTaskOfAScopeGoesAfterWhatTheLastRunLeft() throws {
        let folder = TemporaryFolder()
        do {
            let h = cartHarness(folder)
            h.send(durableEdit("/add"))
            h.send(durableEdit("/update"))
        }
        let h = cartHarness(folder)
        let new = h.send(durableEdit("/remove"))
        #expect(!new.isRestored)
        #expect(new.state.name == "waiting")
        h.transport.releaseAll()
        h.transport.releaseAll()
        h.transport.releaseAll()
        #expect(h.transport.records.map(\.path) == ["/add", "/update", "/remove"])
        #expect(recordNames(in: folder.url) == [])
        // The replayed tasks told the delegate how they ended, as any task does.
        #expect(h.recorder.events.filter { $0.hasSuffix(" finished") }.count == 3)
    }

    @Test func anotherScopeIsNotReplayedByASendIntoThisOne() throws {
        let folder = TemporaryFolder()
        do {
            let h = cartHarness(folder)
            h.send(durableEdit("/a", scope: "wishlist"))
        }
        let h = cartHarness(folder)
        h.send(durableEdit("/add"))
        #expect(h.transport.records.map(\.path) == ["/add"])
        #expect(recordNames(in: folder.url, scope: "wishlist").count == 1)
        let replay = try h.manager.replayDurableTasks(inScope: "wishlist")
        #expect(replay.count == 1)
        #expect(restoredTasks(h).map(\.request.path) == ["/a"])
    }

    @Test func aDamagedRecordAndOneThatNoLongerDecodesAreSetAsideAndTheLineGoesOn() throws {
        let folder = TemporaryFolder()
        do {
            let h = cartHarness(folder)
            for path in ["/a", "/b", "/c", "/add"] { h.send(durableEdit(path)) }
        }
        let scopeFolder = folder.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
        // Record 2 loses its last byte; record 3 holds a request the app can no longer decode.
        let second = scopeFolder.appendingPathComponent("00000000000000000002.task")
        let bytes = try Data(contentsOf: second)
        try bytes.dropLast().write(to: second)
        let third = DurableRecord(
            sequence: 3, idempotencyKey: nil, requestType: "Shop.OldCartRequest", request: Data(#"{"v":1}"#.utf8))
        try third.bytes.write(to: scopeFolder.appendingPathComponent("00000000000000000003.task"))

        let h = cartHarness(folder)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 2)
        #expect(restoredTasks(h).map(\.request.path) == ["/a", "/add"])
        #expect(
            replay.setAside.map(\.file.lastPathComponent) == ["00000000000000000002.task", "00000000000000000003.task"])
        #expect(replay.setAside.allSatisfy { if case .durableStore = $0.error { true } else { false } })
        #expect("\(replay.setAside[0].error)".contains("cut short"))
        #expect("\(replay.setAside[1].error)".contains("Shop.OldCartRequest"))
        // Nothing is lost: the two are kept, whole, where the store lists them.
        let kept = h.manager.engine.durableStore?.setAsideFiles(inScope: "cart") ?? []
        #expect(kept.map(\.lastPathComponent) == ["00000000000000000002.task", "00000000000000000003.task"])
        #expect(try Data(contentsOf: kept[0]) == bytes.dropLast())
        // A new record never takes a set-aside one's name.
        h.transport.releaseAll()
        h.transport.releaseAll()
        h.send(durableEdit("/remove"))
        #expect(recordNames(in: folder.url) == ["00000000000000000005.task"])
    }

    // MARK: Refusals: the task ends at once, never sent

    @Test func aSecondStoreOnTheSameScopeIsRefusedUntilTheFirstIsReleased() throws {
        let folder = TemporaryFolder()
        var first: Harness? = cartHarness(folder)
        first?.send(durableEdit("/add"))
        let second = cartHarness(folder)
        let refused = second.send(durableEdit("/update"))
        #expect(refused.state.name.hasPrefix("durableStore("))
        #expect(refused.state.name.contains("open elsewhere"))
        #expect(second.transport.records.isEmpty)
        #expect(throws: APIError.self) { try second.manager.replayDurableTasks(inScope: "cart") }
        // Another scope of the same folder is free.
        #expect(second.send(durableEdit("/a", scope: "wishlist")).state.name == "running")
        first = nil
        let replay = try second.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 1)
        #expect(restoredTasks(second).map(\.request.path) == ["/add"])
    }

    @Test func aFullDiskEndsTheTaskUnsentAndTheNextOneIsWritten() throws {
        let folder = TemporaryFolder()
        let diskIsFull = Locked(true)
        let store = APIEngine.DurableStore(directory: folder.url) { data, url throws(OwnerOnlyFile.WriteError) in
            if diskIsFull.withLock({ $0 }) { throw OwnerOnlyFile.WriteError(path: url.path, code: ENOSPC) }
            try OwnerOnlyFile.write(data, to: url, synchronized: true)
        }
        let h = cartHarness(folder, store: store)
        let refused = h.send(durableEdit("/add"))
        guard case .failed(.durableStore(let reason, let underlying)) = refused.state else {
            Issue.record("ended as \(refused.state)")
            return
        }
        #expect(reason.contains("could not be written"))
        #expect((underlying as? POSIXError)?.code == .ENOSPC)
        #expect(h.transport.records.isEmpty)
        #expect(recordNames(in: folder.url) == [])
        #expect(h.recorder.events.contains { $0.hasPrefix("\(refused.identifier) failed durableStore") })
        diskIsFull.withLock { $0 = false }
        let written = h.send(durableEdit("/update"))
        #expect(written.state.name == "running")
        #expect(recordNames(in: folder.url) == ["00000000000000000001.task"])
    }

    @Test func withoutAStoreADurableTaskEndsAtOnceNamingTheSetting() {
        let h = Harness()
        h.transport.stub(nil, "/add", .json(#"{"value":"ok"}"#))
        let task = h.send(durableEdit("/add"))
        #expect(task.state.name.contains("APIEngine.Configuration.durableStore"))
        #expect(h.transport.records.isEmpty)
        #expect(throws: APIError.self) { try h.manager.replayDurableTasks(inScope: "cart") }
    }

    @Test func aRequestThatIsNotCodableEndsAtOnceNamingItsType() async {
        let folder = TemporaryFolder()
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/plain", .json(#"{"value":"ok"}"#))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.durableStore = APIEngine.DurableStore(directory: folder.url)
        let manager = PlainManager(engine: APIEngine(configuration: configuration))
        await #expect(throws: APIError.self) { try await manager.response(for: PlainRequest()) }
        let task = manager.send(PlainRequest())
        #expect("\(task.state)".contains("PlainRequest is not Encodable"))
        #expect(transport.records.isEmpty)
    }

    // MARK: Order across threads

    @Test func tasksSentFromManyThreadsReplayInTheOrderTheirLineHad() throws {
        let folder = TemporaryFolder()
        var lineOrder: [String] = []
        do {
            let h = cartHarness(folder)
            for index in 0..<40 { h.transport.stub(nil, "/edit/\(index)", MockTransport.Reply.json("{}").held()) }
            let tasks = Locked<[APITask<TestRequest>]>([])
            DispatchQueue.concurrentPerform(iterations: 40) { index in
                let task = h.send(durableEdit("/edit/\(index)"))
                tasks.withLock { $0.append(task) }
            }
            lineOrder = tasks.withLock { $0 }.sorted { $0.identifier < $1.identifier }.map(\.request.path)
        }
        // More than a replay keeps in memory: the line's order holds across its window.
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        for index in 0..<40 { h.transport.stub(nil, "/edit/\(index)", MockTransport.Reply.json(#"{"value":"ok"}"#)) }
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 40)
        #expect(h.transport.records.map(\.path) == lineOrder)
        #expect(recordNames(in: folder.url) == [])
    }
}

private struct PlainRequest: APIRequest {
    var url: URL { testBaseURL }
    var path: String { "/plain" }
    var concurrencyPolicy: APIConcurrencyPolicy { .durable }
}

private final class PlainManager: APIManager {
    typealias Request = PlainRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}
