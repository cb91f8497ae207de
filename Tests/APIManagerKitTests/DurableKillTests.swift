// The durable line's corrections (issue 40, items 10 to 12): a resolution killed at any of its steps
// leaves a line the next launch reads as still stopped or as resolved, never both; the folders the
// store writes into are never links; a record stays until the app has been told how its task ended.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A harness on a store that stops the cart's line at a final refusal of `/add` (422); every other
/// edit is held until released.
private func stoppingHarness(_ directory: URL, refusesAdd: Bool = true) -> Harness {
    let store = APIEngine.DurableStore(directory: directory, scopesWhenRefused: ["cart": .stopTheLine])
    let h = Harness(durableStore: store)
    h.transport.stub(nil, "/add", refusesAdd ? .status(422) : MockTransport.Reply.json(#"{"value":"ok"}"#).held())
    for path in ["/update", "/add-fixed"] {
        h.transport.stub(nil, path, MockTransport.Reply.json(#"{"value":"ok"}"#).held())
    }
    return h
}

/// The files of the cart's folder (records, refused records, leftovers of writes), sorted.
private func files(in directory: URL) -> [String] {
    let folder = directory.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    return names.filter { $0 != "lock" && $0 != "set-aside" }.sorted()
}

/// A copy of a store's directory, as a kill would leave it.
private func snapshot(_ directory: URL) throws -> TemporaryFolder {
    let copy = TemporaryFolder("kill")
    try FileManager.default.copyItem(at: directory, to: copy.url)
    return copy
}

/// How the next launch reads a line: stopped by a refusal, and the restored tasks by path (`/add`
/// held on the wire, not refused again).
private func relaunch(_ directory: URL) throws -> (stopped: Bool, restored: [String], h: Harness) {
    let h = stoppingHarness(directory, refusesAdd: false)
    let replay = try h.manager.replayDurableTasks(inScope: "cart")
    return (replay.stoppedBy != nil, restoredTasks(h).map(\.request.path), h)
}

@Suite("Durable line: kills, links and the app told", .timeLimit(.minutes(1)))
struct DurableKillTests {
    /// A stopped line (`/add` refused, `/update` behind it), its folder before a resolution and
    /// after it (the resolved task held on the wire, so its record stays).
    private func beforeAndAfter(
        _ resolve: (Harness) throws -> Void
    ) throws -> (before: TemporaryFolder, after: TemporaryFolder, live: TemporaryFolder) {
        let live = TemporaryFolder("line")
        let h = stoppingHarness(live.url)
        h.send(durableEdit("/add"))
        h.send(durableEdit("/update"))
        let before = try snapshot(live.url)
        try resolve(h)
        let after = try snapshot(live.url)
        return (before, after, live)
    }

    /// Every state a kill can leave between `before` and `after`: each file of `after` that is new
    /// or changed put in place one at a time (the order a resolution writes: new records first),
    /// then each file only `before` has removed, one at a time; with a write's leftover beside.
    private func statesBetween(_ before: URL, _ after: URL) throws -> [TemporaryFolder] {
        let scope = DurableScopeFolder.folderName(of: "cart")
        let old = files(in: before)
        let new = files(in: after)
        let added = new.filter { name in
            !old.contains(name)
                || FileManager.default.contents(
                    atPath: before.appendingPathComponent(scope).appendingPathComponent(name).path)
                    != FileManager.default.contents(
                        atPath: after.appendingPathComponent(scope).appendingPathComponent(name).path)
        }
        let removed = old.filter { !new.contains($0) }
        var states: [TemporaryFolder] = []
        let current = try snapshot(before)
        // A write killed before its rename leaves a temporary file.
        let leftover = try snapshot(before)
        FileManager.default.createFile(
            atPath: leftover.url.appendingPathComponent(scope).appendingPathComponent(".tmp-killed").path,
            contents: Data("half".utf8))
        states.append(leftover)
        states.append(try snapshot(current.url))
        for name in added {
            let target = current.url.appendingPathComponent(scope).appendingPathComponent(name)
            try? FileManager.default.removeItem(at: target)
            try FileManager.default.copyItem(
                at: after.appendingPathComponent(scope).appendingPathComponent(name), to: target)
            states.append(try snapshot(current.url))
        }
        for name in removed {
            try FileManager.default.removeItem(
                at: current.url.appendingPathComponent(scope).appendingPathComponent(name))
            states.append(try snapshot(current.url))
        }
        return states
    }

    @Test func aReplacementKilledAtAnyStepIsReadAsStillStoppedOrAsReplacedNeverBoth() throws {
        let (before, after, _) = try beforeAndAfter { h in
            try h.manager.resolveRefusedDurableTask(inScope: "cart", replacingWith: durableEdit("/add-fixed"))
        }
        #expect(files(in: before.url) == ["00000000000000000001.refused", "00000000000000000002.task"])
        #expect(files(in: after.url) == ["00000000000000000001.task", "00000000000000000002.task"])
        let states = try statesBetween(before.url, after.url)
        #expect(states.count == 4)
        for state in states {
            let (stopped, restored, h) = try relaunch(state.url)
            if stopped {
                #expect(restored == ["/update"], "still stopped: the refused edit is not sent")
            } else {
                #expect(restored == ["/add-fixed", "/update"], "replaced: the replacement, then the rest")
            }
            #expect(!(stopped && restored.contains("/add-fixed")), "never both")
            // Resolving a line read as stopped sends the replacement once; one read as replaced
            // has nothing left to resolve.
            if stopped {
                try h.manager.resolveRefusedDurableTask(inScope: "cart", replacingWith: durableEdit("/add-fixed"))
            } else {
                #expect(throws: APIError.self) {
                    try h.manager.resolveRefusedDurableTask(inScope: "cart", replacingWith: durableEdit("/add-fixed"))
                }
            }
            h.transport.releaseAll()
            h.transport.releaseAll()
            #expect(h.transport.records.map(\.path) == ["/add-fixed", "/update"], "each edit on the wire once")
        }
    }

    @Test func aRetryKilledAtAnyStepIsReadAsStillStoppedOrAsRetried() throws {
        let (before, after, _) = try beforeAndAfter { h in
            h.transport.stub(nil, "/add", MockTransport.Reply.json(#"{"value":"ok"}"#).held())
            try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .retry)
        }
        for state in try statesBetween(before.url, after.url) {
            let (stopped, restored, _) = try relaunch(state.url)
            #expect(restored == (stopped ? ["/update"] : ["/add", "/update"]))
        }
    }

    @Test func aDropKilledAtAnyStepIsReadAsStillStoppedOrAsDropped() throws {
        let (before, after, _) = try beforeAndAfter { h in
            try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop)
        }
        for state in try statesBetween(before.url, after.url) {
            let (stopped, restored, _) = try relaunch(state.url)
            #expect(restored == ["/update"])
            #expect(stopped == files(in: state.url).contains("00000000000000000001.refused"))
        }
    }

    // MARK: Links (item 11)

    @Test(arguments: ["set-aside", "scope"])
    func aFolderOfTheStoresThatIsALinkIsRefusedAndNothingIsMoved(which: String) throws {
        let store = TemporaryFolder("store")
        let outside = TemporaryFolder("outside")
        try FileManager.default.createDirectory(at: outside.url, withIntermediateDirectories: true)
        do {
            let h = Harness(durableStore: APIEngine.DurableStore(directory: store.url))
            h.transport.stub(nil, "/add", MockTransport.Reply.json("{}").held())
            h.send(durableEdit("/add"))
        }
        let scopeFolder = store.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
        // A damaged record, which a replay would move into `set-aside/`.
        try Data("damaged".utf8).write(to: scopeFolder.appendingPathComponent("00000000000000000009.task"))
        let linked: URL
        if which == "set-aside" {
            linked = scopeFolder.appendingPathComponent("set-aside")
            try FileManager.default.removeItem(at: linked)
        } else {
            // The scope's folder itself: its records moved outside, the link left in its place.
            let moved = outside.url.appendingPathComponent("cart")
            try FileManager.default.moveItem(at: scopeFolder, to: moved)
            linked = scopeFolder
        }
        try FileManager.default.createSymbolicLink(at: linked, withDestinationURL: outside.url)
        let before = try FileManager.default.subpathsOfDirectory(atPath: outside.url.path).sorted()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: store.url))
        #expect {
            try h.manager.replayDurableTasks(inScope: "cart")
        } throws: { error in
            guard case .durableStore(let reason, _) = error as? APIError else { return false }
            return reason.contains("not a folder of the store's")
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: outside.url.path).sorted() == before)
        #expect(h.transport.records.isEmpty)
    }

    // MARK: The app told before the record goes (item 12)

    @Test(arguments: ["cart", nil] as [String?])
    func theRecordIsStillOnDiskWhileTheDelegateIsToldAndGoneAfter(scope: String?) throws {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        h.transport.stub(nil, "/add", .json(#"{"value":"added"}"#))
        h.transport.stub(nil, "/gone", .status(410))
        let seen = Locked<[[String]]>([])
        h.recorder.onEvent = { line in
            if line.hasSuffix(" finished") || line.contains(" failed") {
                seen.withLock { $0.append(recordNames(in: folder.url, scope: scope)) }
            }
        }
        h.send(durableEdit("/add", scope: scope))
        h.send(durableEdit("/gone", scope: scope))
        #expect(
            seen.withLock { $0 } == [["00000000000000000001.task"], ["00000000000000000002.task"]],
            "each record is there while the app hears how its edit ended")
        #expect(recordNames(in: folder.url, scope: scope) == [])
    }

    /// A kill just after the app was told leaves the record: the next launch sends the edit again
    /// with its key (the server answers from what it stored for the key) and tells the app again;
    /// the app may hear an end twice, never not at all.
    @Test func aKillAfterTheAppWasToldReplaysTheEditWithItsKeyAndTellsItAgain() throws {
        let folder = TemporaryFolder()
        let killed = TemporaryFolder("killed")
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        h.transport.stub(nil, "/add", .json(#"{"value":"added"}"#))
        h.recorder.onEvent = { line in
            if line.hasSuffix(" finished"), !FileManager.default.fileExists(atPath: killed.url.path) {
                try? FileManager.default.copyItem(at: folder.url, to: killed.url)
            }
        }
        let task = h.send(durableEdit("/add"))
        #expect(task.state.name == "finished")
        let relaunched = Harness(durableStore: APIEngine.DurableStore(directory: killed.url))
        relaunched.transport.stub(nil, "/add", .json(#"{"value":"added"}"#))
        let replay = try relaunched.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 1)
        #expect(
            relaunched.transport.records.first?.request.value(forHTTPHeaderField: "Idempotency-Key")
                == task.idempotencyKey)
        #expect(relaunched.recorder.events.filter { $0.hasSuffix(" finished") }.count == 1)
        #expect(recordNames(in: killed.url) == [])
    }
}
