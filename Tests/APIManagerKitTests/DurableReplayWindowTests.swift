import APIManagerKitTesting
// A long durable line replays through a window: a few restored tasks in memory, the rest of the line
// on disk until one of them ends; the line's order holds across it, and this run's tasks wait
// behind the whole backlog.
import Foundation
import Testing

@testable import APIManagerKit

/// A store that keeps `window` restored tasks of a scope in memory at once.
private func windowStore(
    _ folder: TemporaryFolder, window: Int, whenRefused: APIEngine.DurableStore.Refusal = .dropAndGoOn
) -> APIEngine.DurableStore {
    APIEngine.DurableStore(directory: folder.url, whenRefused: whenRefused, replayWindow: window) {
        data, url throws(OwnerOnlyFile.WriteError) in
        try OwnerOnlyFile.write(data, to: url, synchronized: true)
    }
}

/// A first run that sent `paths` into `scope`'s durable line and never saw them end.
private func leaveOnDisk(_ paths: [String], scope: String? = "cart", in folder: TemporaryFolder) {
    let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
    for path in paths { h.transport.stub(nil, path, MockTransport.Reply.json(#"{"value":"ok"}"#).held()) }
    for path in paths { h.send(durableEdit(path, scope: scope)) }
}

/// A relaunched harness whose transport holds every edit of `paths` until released.
private func relaunch(
    _ folder: TemporaryFolder, window: Int, paths: [String],
    whenRefused: APIEngine.DurableStore.Refusal = .dropAndGoOn
) -> Harness {
    let h = Harness(durableStore: windowStore(folder, window: window, whenRefused: whenRefused))
    for path in paths { h.transport.stub(nil, path, MockTransport.Reply.json(#"{"value":"ok"}"#).held()) }
    return h
}

private let edits = (0..<5).map { "/edit/\($0)" }

@Suite("Durable replay window", .timeLimit(.minutes(1)))
struct DurableReplayWindowTests {
    // MARK: The machine alone

    /// A restored task of `scope`, as a replay sends it.
    private static func restored(_ h: inout MachineHarness, scope: String? = "cart") -> AnyAPITask {
        let task = AnyAPITask(
            identifier: UInt64(h.tasks.count + 1), policy: .durable, scope: scope,
            durableSlot: DurableSlot(isRestored: true))
        h.tasks.append(task)
        h.run { machine in machine.send(task, observed: false) }
        return task
    }

    @Test(arguments: ["cart", nil] as [String?])
    func restoredTasksGoAheadOfThisRunsWhateverTheirPriorityAndTheBacklogHoldsThisRunsBack(scope: String?) {
        var h = MachineHarness()
        h.run { $0.holdBehindBacklog(of: scope) }
        let first = Self.restored(&h, scope: scope)
        #expect(h.events(of: first) == ["started 1"], "a restored task starts in an idle line")
        let urgent = h.send(.durable, scope: scope, priority: 5)
        let plain = h.send(.waitUntilDone, scope: scope)
        let second = Self.restored(&h, scope: scope)
        #expect(h.machine.inFlightTasks == [first, second, urgent, plain], "restored ones first, then by priority")
        h.finish(first)
        #expect(h.events(of: second) == ["waiting", "started 1"])
        h.finish(second)
        #expect(h.events(of: urgent) == ["waiting"], "records still on disk go first")
        #expect(h.events(of: plain) == ["waiting"])
        let third = Self.restored(&h, scope: scope)
        #expect(h.events(of: third) == ["waiting", "started 1"], "the next record, made into its task, goes first")
        h.finish(third)
        #expect(Array(h.lastActions) == [.settleDurable(third, .remove)], "its record goes; nothing starts")
        h.run { $0.backlogDrained(of: scope) }
        #expect(h.events(of: urgent) == ["waiting", "started 1"])
        h.finish(urgent)
        #expect(h.events(of: plain) == ["waiting", "started 1"])
    }

    @Test func aBacklogHoldsOnlyItsOwnScope() {
        var h = MachineHarness()
        h.run { $0.holdBehindBacklog(of: "cart") }
        let other = h.send(.durable, scope: "wishlist")
        let unscoped = h.send(.durable)
        #expect(h.events(of: other) == ["started 1"])
        #expect(h.events(of: unscoped) == ["started 1"])
        let held = h.send(.durable, scope: "cart")
        #expect(h.events(of: held) == ["waiting"], "held even in an idle line")
        h.run { $0.backlogDrained(of: "cart") }
        #expect(h.events(of: held) == ["waiting", "started 1"])
        #expect(Array(h.run { $0.backlogDrained(of: "cart") }).isEmpty, "drained once")
    }

    @Test func aCancelledRestoredTaskLeavesItsPlaceAndTheNextStarts() {
        var h = MachineHarness()
        h.run { $0.holdBehindBacklog(of: "cart") }
        let first = Self.restored(&h)
        let second = Self.restored(&h)
        let third = Self.restored(&h)
        h.run { $0.cancel(tasks: [second], reason: .explicit) }
        h.finish(first)
        #expect(h.events(of: third) == ["waiting", "started 1"])
        #expect(h.events(of: second) == ["waiting", "failed cancelled(explicit)"])
    }

    // MARK: The engine and the store

    @Test(arguments: ["cart", nil] as [String?])
    func aReplayKeepsOnlyItsWindowInMemoryAndTheLineGoesInOrderBeforeThisRunsTasks(scope: String?) throws {
        let folder = TemporaryFolder()
        leaveOnDisk(edits, scope: scope, in: folder)
        let h = relaunch(folder, window: 2, paths: edits + ["/new"])
        let replay = try h.manager.replayDurableTasks(inScope: scope)
        #expect(replay.count == 5)
        #expect(restoredTasks(h).map(\.request.path) == ["/edit/0", "/edit/1"])
        let new = h.send(durableEdit("/new", scope: scope))
        #expect(new.state.name == "waiting")
        var inMemory: [Int] = []
        for _ in 0..<6 {
            inMemory.append(restoredTasks(h).count)
            #expect(h.transport.release())
        }
        #expect(inMemory == [2, 2, 2, 2, 1, 0], "never more than the window")
        #expect(h.transport.records.map(\.path) == edits + ["/new"])
        #expect(new.state.name == "finished")
        #expect(recordNames(in: folder.url, scope: scope) == [])
    }

    @Test func theFirstSendIntoTheScopeReplaysThroughTheWindowBeforeItself() {
        let folder = TemporaryFolder()
        leaveOnDisk(edits, in: folder)
        let h = relaunch(folder, window: 1, paths: edits + ["/new"])
        let new = h.send(durableEdit("/new"))
        #expect(restoredTasks(h).map(\.request.path) == ["/edit/0"])
        for _ in 0..<6 { h.transport.releaseAll() }
        #expect(h.transport.records.map(\.path) == edits + ["/new"])
        #expect(new.state.name == "finished")
        #expect(h.recorder.events.filter { $0.hasSuffix(" finished") }.count == 6)
    }

    @Test func theOutcomesCoverTheWholeLineInOrderThenFinish() async throws {
        let folder = TemporaryFolder()
        leaveOnDisk(edits, in: folder)
        let h = relaunch(folder, window: 2, paths: edits)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        for _ in 0..<5 { h.transport.releaseAll() }
        var ended: [String] = []
        for await outcome in replay.outcomes {
            #expect(outcome.task.isRestored)
            if case .success = outcome.result { ended.append(outcome.task.request.path) }
        }
        #expect(ended == edits)
    }

    @Test func aRecordChangedOnDiskAfterTheReplayCheckedItIsSetAsideAndTheLineGoesOn() async throws {
        let folder = TemporaryFolder()
        leaveOnDisk(["/edit/0", "/edit/1", "/edit/2"], in: folder)
        let h = relaunch(folder, window: 1, paths: edits)
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 3)
        #expect(replay.setAside.isEmpty)
        let second = folder.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
            .appendingPathComponent("00000000000000000002.task")
        let bytes = try Data(contentsOf: second)
        try bytes.dropLast().write(to: second)
        for _ in 0..<2 { h.transport.releaseAll() }
        #expect(h.transport.records.map(\.path) == ["/edit/0", "/edit/2"])
        let kept = h.manager.engine.durableStore?.setAsideFiles(inScope: "cart") ?? []
        #expect(kept.map(\.lastPathComponent) == ["00000000000000000002.task"])
        #expect(try Data(contentsOf: kept[0]) == bytes.dropLast(), "kept as it was found")
        var outcomes = 0
        for await _ in replay.outcomes { outcomes += 1 }
        #expect(outcomes == 2, "the sequence finishes without the lost record")
    }

    @Test func cancellingARestoredTaskRemovesItsRecordAndLetsTheNextIn() {
        let folder = TemporaryFolder()
        leaveOnDisk(["/edit/0", "/edit/1", "/edit/2"], in: folder)
        let h = relaunch(folder, window: 1, paths: edits)
        _ = try? h.manager.replayDurableTasks(inScope: "cart")
        restoredTasks(h).first?.cancel()
        #expect(restoredTasks(h).map(\.request.path) == ["/edit/1"])
        #expect(restoredTasks(h).map(\.state.name) == ["running"])
        #expect(
            recordNames(in: folder.url) == ["00000000000000000002.task", "00000000000000000003.task"],
            "the cancelled task's record is gone")
        for _ in 0..<2 { h.transport.releaseAll() }
        #expect(h.transport.records.map(\.path) == ["/edit/0", "/edit/1", "/edit/2"])
        #expect(recordNames(in: folder.url) == [])
    }

    @Test func aRefusalThatStopsTheLineHoldsTheBacklogUntilTheAppDropsIt() throws {
        let folder = TemporaryFolder()
        leaveOnDisk(edits, in: folder)
        let h = relaunch(folder, window: 1, paths: Array(edits.dropFirst()) + ["/new"], whenRefused: .stopTheLine)
        h.transport.stub(nil, "/edit/0", MockTransport.Reply.status(422).held())
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.stoppedBy == nil)
        let new = h.send(durableEdit("/new"))
        h.transport.releaseAll()
        #expect(h.transport.records.map(\.path) == ["/edit/0"], "the line stopped at the refusal")
        #expect(restoredTasks(h).map(\.request.path) == ["/edit/1"], "the next record waits, in memory")
        #expect(new.state.name == "waiting")
        try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop)
        for _ in 0..<5 { h.transport.releaseAll() }
        #expect(h.transport.records.map(\.path) == edits + ["/new"])
        #expect(recordNames(in: folder.url, suffixes: [".task", ".refused"]) == [])
    }

    @Test func aManagerReleasedMidLineLeavesTheRestOnDiskAndTheEnginesOtherTasksGoOn() throws {
        let folder = TemporaryFolder()
        leaveOnDisk(["/edit/0", "/edit/1", "/edit/2"], in: folder)
        let h = relaunch(folder, window: 1, paths: edits + ["/new"])
        do {
            let other = TestManager(engine: h.manager.engine)
            let replay = try other.replayDurableTasks(inScope: "cart")
            #expect(replay.count == 3)
        }
        // The restored task's manager is gone: its answer cannot be built, and the records stay.
        h.transport.releaseAll()
        #expect(h.transport.records.map(\.path) == ["/edit/0"])
        #expect(recordNames(in: folder.url).count == 3)
        let new = h.send(durableEdit("/new"))
        h.transport.releaseAll()
        #expect(new.state.name == "finished", "not held behind records no manager will send")
        #expect(recordNames(in: folder.url).count == 3, "left for the next launch")
    }
}

@Suite("Durable replay window, inline")
struct DurableReplayWindowInlineTests {
    @Test(.timeLimit(.minutes(1)))
    func aLongLineOnAnInlineEngineKeepsTheStackFlat() throws {
        let folder = TemporaryFolder()
        let paths = (0..<60).map { "/edit/\($0)" }
        leaveOnDisk(paths, in: folder)
        let h = Harness(durableStore: windowStore(folder, window: 1))
        // The stack's depth when each request reaches the transport: were each refill's start nested
        // in the end of the task before it, each task would be deeper than the one before it.
        let depths = Locked<[Int]>([])
        for path in paths {
            h.transport.stub(nil, path) { _ in
                depths.withLock { $0.append(Thread.callStackSymbols.count) }
                return .json(#"{"value":"ok"}"#)
            }
        }
        let replay = try h.manager.replayDurableTasks(inScope: "cart")
        #expect(replay.count == 60)
        #expect(h.transport.records.map(\.path) == paths)
        let seen = depths.withLock { $0 }
        #expect(seen.count == 60)
        #expect((seen.max() ?? 0) - (seen.min() ?? 0) < 40, "depths \(seen)")
    }
}

@Suite("Durable replay window, random event sequences", .timeLimit(.minutes(1)))
struct DurableReplayWindowRandomTests {
    /// One random run on the machine alone: a scope opened with `backlog` restored records (made
    /// into tasks a few at a time, in order, as a store's refill does), this run's durable tasks
    /// sent at random, attempts that finish or fail for a retry, cancellations. After every event:
    /// one task at most runs in the scope, and no task of this run has started while restored
    /// records remain; at the end, the restored tasks started in their line's order, before every
    /// task of this run.
    private func run(seed: UInt64, backlog: Int, steps: Int) {
        var random = SplitMix64(state: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        let scope: String? = seed % 2 == 0 ? "cart" : nil
        var h = MachineHarness()
        h.run { $0.holdBehindBacklog(of: scope) }
        var restored: [AnyAPITask] = []
        var drained = false
        // Refills asked for by ended window tasks, not yet arrived (a store's refill comes later).
        var refillsDue = 0
        var starts: [UInt64] = []
        func restoreNext() {
            guard restored.count < backlog else { return }
            let task = AnyAPITask(
                identifier: UInt64(h.tasks.count + 1), policy: .durable, scope: scope,
                durableSlot: DurableSlot(isRestored: true))
            h.tasks.append(task)
            restored.append(task)
            h.run { machine in machine.send(task, observed: false) }
        }
        for _ in 0..<(1 + pick(3)) { restoreNext() }
        for step in 0..<steps {
            let before = Set(h.events.filter { $0.hasSuffix(" started 1") })
            let live = h.tasks.filter { $0.phase != .ended }
            switch pick(7) {
            case 6:
                if refillsDue > 0 {
                    refillsDue -= 1
                    restoreNext()
                }
            case 0:
                h.send(.durable, scope: scope, priority: [0, 0, 3][pick(3)])
            case 1, 2:
                if let task = live.first(where: { $0.phase == .running }) {
                    h.finish(task)
                    if task.bag.durableSlot?.isRestored == true { refillsDue += 1 }  // the next record, later
                }
            case 3:
                if let task = live.first(where: { $0.phase == .running }) { h.failForRetry(task, delay: 1) }
            case 4:
                if let task = live.first(where: { $0.phase == .waitingForRetry }) {
                    let attempt = task.attemptNumber
                    h.run { machine in machine.retryTimerFired(task, attempt: attempt) }
                }
            default:
                if let task = live.randomElement(using: &random) {
                    h.run { machine in machine.cancel(task, reason: .explicit) }
                    if task.bag.durableSlot?.isRestored == true { refillsDue += 1 }
                }
            }
            if !drained, restored.count == backlog {
                drained = true
                h.run { $0.backlogDrained(of: scope) }
            }
            for line in h.events.filter({ $0.hasSuffix(" started 1") }) where !before.contains(line) {
                starts.append(UInt64(line.split(separator: " ")[0]) ?? 0)
            }
            let running = h.tasks.filter { $0.phase == .running || $0.phase == .waitingForRetry }
            #expect(running.count <= 1, "seed \(seed) step \(step): \(running.count) run at once")
            if !drained {
                #expect(
                    running.allSatisfy { $0.bag.durableSlot?.isRestored == true },
                    "seed \(seed) step \(step): a task of this run started before the backlog")
            }
        }
        let restoredIDs = Set(restored.map(\.identifier))
        let restoredStarts = starts.filter { restoredIDs.contains($0) }
        #expect(restoredStarts == restoredStarts.sorted(), "seed \(seed): restored tasks out of order")
        if let firstOfThisRun = starts.firstIndex(where: { !restoredIDs.contains($0) }) {
            #expect(
                starts[firstOfThisRun...].allSatisfy { !restoredIDs.contains($0) },
                "seed \(seed): a restored task started after one of this run")
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func theLineKeepsItsOrderAcrossTheWindowUnderRandomEvents(seed: UInt64) {
        run(seed: seed, backlog: 12, steps: 400)
    }
}
