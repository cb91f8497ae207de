import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

/// The records of a scope's folder, pending or refused, sorted.
private func records(in folder: URL, scope: String? = "cart") -> [String] {
    recordNames(in: folder, scope: scope, suffixes: [".task", ".refused"])
}

/// A harness on a store that stops `scope`'s line at a final refusal; `/add` is refused with `status`.
private func stoppingHarness(
    _ folder: TemporaryFolder, scope: String? = "cart", status: Int = 422
) -> Harness {
    let store = APIEngine.DurableStore(
        directory: folder.url, whenRefused: scope == nil ? .stopTheLine : .dropAndGoOn,
        scopesWhenRefused: scope.map { [$0: .stopTheLine] } ?? [:])
    let h = Harness(durableStore: store)
    h.transport.stub(nil, "/add", .status(status))
    for path in ["/update", "/remove", "/later"] { h.transport.stub(nil, path, .json("{}")) }
    return h
}

@Suite("Durable line: final refusals", .timeLimit(.minutes(1)))
struct DurableRefusalTests {
    @Test func onlyAFourHundredThatWillNotChangeIsAFinalRefusal() {
        for status in [400, 401, 403, 404, 410, 413, 415, 422, 451, 499] {
            #expect(APIEngine.DurableStore.isFinalRefusal(.unacceptableStatus(APIRawResponse(statusCode: status))))
        }
        for status in [408, 409, 425, 429, 500, 503, 302, 200] {
            #expect(!APIEngine.DurableStore.isFinalRefusal(.unacceptableStatus(APIRawResponse(statusCode: status))))
        }
        #expect(!APIEngine.DurableStore.isFinalRefusal(.transport(underlying: URLError(.notConnectedToInternet))))
    }

    @Test(arguments: ["cart", nil] as [String?])
    func aStoppedLineHoldsTheTasksBehindAndThoseSentLaterAndKeepsTheRefusedRecord(scope: String?) {
        let folder = TemporaryFolder()
        let h = stoppingHarness(folder, scope: scope)
        let add = h.send(durableEdit("/add", scope: scope))
        #expect(add.state.name == "status(422)", "the app is told the refusal")
        let update = h.send(durableEdit("/update", scope: scope))
        let later = h.send(durableEdit("/later", scope: scope))
        #expect(update.state.name == "waiting")
        #expect(later.state.name == "waiting")
        #expect(h.transport.records.map(\.path) == ["/add"])
        #expect(
            records(in: folder.url, scope: scope) == [
                "00000000000000000001.refused", "00000000000000000002.task", "00000000000000000003.task",
            ])
        // Another scope is not stopped.
        #expect(h.send(durableEdit("/remove", scope: "wishlist")).state.name == "finished")
    }

    @Test func droppingTheRefusedTaskLetsTheLineGoOnInOrder() throws {
        let folder = TemporaryFolder()
        let h = stoppingHarness(folder)
        h.send(durableEdit("/add"))
        let update = h.send(durableEdit("/update"))
        let remove = h.send(durableEdit("/remove"))
        #expect(try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop) == nil)
        #expect(update.state.name == "finished")
        #expect(remove.state.name == "finished")
        #expect(h.transport.records.map(\.path) == ["/add", "/update", "/remove"])
        #expect(records(in: folder.url) == [])
        // Nothing stops the line now.
        #expect(throws: APIError.self) { try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop) }
    }

    @Test func retryingTheRefusedTaskSendsItFirstWithItsKeyThenTheRest() throws {
        let folder = TemporaryFolder()
        let h = stoppingHarness(folder)
        h.transport.stub(nil, "/add", .status(422), .json("{}"))
        let add = h.send(durableEdit("/add"))
        let update = h.send(durableEdit("/update"))
        let retried = try #require(try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .retry))
        #expect(retried.request.path == "/add")
        #expect(retried.idempotencyKey == add.idempotencyKey)
        #expect(retried.state.name == "finished")
        #expect(update.state.name == "finished")
        #expect(h.transport.records.map(\.path) == ["/add", "/add", "/update"])
        #expect(records(in: folder.url) == [])
    }

    @Test func aStoppedLineStaysStoppedAcrossARelaunchUntilResolved() throws {
        let folder = TemporaryFolder()
        do {
            let h = stoppingHarness(folder)
            h.send(durableEdit("/add"))
            h.send(durableEdit("/update"))
        }
        let h = stoppingHarness(folder)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.stoppedBy?.lastPathComponent == "00000000000000000001.refused")
        #expect(replay.count == 1)
        #expect(restoredTasks(h).map(\.request.path) == ["/update"])
        #expect(restoredTasks(h).map(\.state.name) == ["waiting"])
        let later = h.send(durableEdit("/later"))
        #expect(later.state.name == "waiting")
        #expect(h.transport.records.isEmpty)
        try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop)
        #expect(h.transport.records.map(\.path) == ["/update", "/later"])
        #expect(records(in: folder.url) == [])
    }

    @Test func withTheDefaultRuleARefusalEndsItsTaskAndTheLineGoesOn() {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        h.transport.stub(nil, "/add", .status(422))
        h.transport.stub(nil, "/update", .json("{}"))
        let add = h.send(durableEdit("/add"))
        let update = h.send(durableEdit("/update"))
        #expect(add.state.name == "status(422)")
        #expect(update.state.name == "finished")
        #expect(records(in: folder.url) == [])
    }

    @Test(arguments: [409, 429, 503])
    func anAnswerThatMaySucceedLaterDoesNotStopTheLine(status: Int) {
        let folder = TemporaryFolder()
        let h = stoppingHarness(folder, status: status)
        h.send(durableEdit("/add"))
        let update = h.send(durableEdit("/update"))
        #expect(update.state.name == "finished")
        #expect(records(in: folder.url) == [])
    }

    @Test func aRecordThatNoLongerDecodesStopsALineWhoseRuleSaysSoUntilDropped() throws {
        let folder = TemporaryFolder()
        do {
            let h = stoppingHarness(folder)
            h.transport.stub(nil, "/update", MockTransport.Reply.json("{}").held())
            for path in ["/update", "/old", "/remove"] { h.send(durableEdit(path)) }
        }
        let scopeFolder = folder.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
        let old = DurableRecord(
            sequence: 2, idempotencyKey: "k", requestType: "Shop.OldCartEdit", request: Data(#"{"v":1}"#.utf8))
        try old.bytes.write(to: scopeFolder.appendingPathComponent("00000000000000000002.task"))

        let h = stoppingHarness(folder)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.setAside.isEmpty)
        #expect(replay.stoppedBy?.lastPathComponent == "00000000000000000002.refused")
        #expect(restoredTasks(h).map(\.request.path) == ["/update", "/remove"])
        #expect(h.transport.records.isEmpty, "the line waits for the app")
        #expect(throws: APIError.self) { try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .retry) }
        #expect(records(in: folder.url).contains("00000000000000000002.refused"), "it still does not decode")
        #expect(h.transport.records.isEmpty)
        try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop)
        #expect(h.transport.records.map(\.path) == ["/update", "/remove"])
        #expect(records(in: folder.url) == [])
    }

    @Test func anEditedVersionTakesTheRefusedTasksPlaceWithAKeyOfItsOwn() throws {
        let folder = TemporaryFolder()
        let h = stoppingHarness(folder)
        h.transport.stub(nil, "/add-fixed", .json("{}"))
        let refused = h.send(durableEdit("/add"))
        let update = h.send(durableEdit("/update"))
        let fixed = try h.manager.resolveRefusedDurableTask(inScope: "cart", replacingWith: durableEdit("/add-fixed"))
        #expect(fixed.state.name == "finished")
        #expect(update.state.name == "finished")
        #expect(h.transport.records.map(\.path) == ["/add", "/add-fixed", "/update"])
        #expect(fixed.idempotencyKey != nil && fixed.idempotencyKey != refused.idempotencyKey)
        #expect(records(in: folder.url) == [])
        // A replacement for another scope is refused, and changes nothing.
        h.send(durableEdit("/add"))
        #expect(throws: APIError.self) {
            try h.manager.resolveRefusedDurableTask(
                inScope: "cart", replacingWith: durableEdit("/add-fixed", scope: "other"))
        }
        #expect(records(in: folder.url).contains { $0.hasSuffix(".refused") })
    }
}
