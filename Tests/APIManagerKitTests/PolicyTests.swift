import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

@Suite("Concurrency policies", .timeLimit(.minutes(1)))
struct PolicyTests {
    // MARK: default

    @Test func defaultTasksStartAtOnceAlongsideEachOther() {
        let h = Harness()
        let tasks = (0..<3).map { _ in h.send(TestRequest("/held")) }
        #expect(tasks.map(\.state.name) == ["running", "running", "running"])
        #expect(h.transport.heldCount == 3)
        h.transport.releaseAll()
        #expect(tasks.map(\.state.name) == ["finished", "finished", "finished"])
        #expect(h.recorder.events(of: tasks[0]) == ["start 1", "finished"])
    }

    @Test func defaultTaskStartsAtOnceWhileAWaitUntilDoneLineExists() {
        let h = Harness()
        let first = h.send(TestRequest("/held", .waitUntilDone))
        let queued = h.send(TestRequest("/held", .waitUntilDone))
        let free = h.send(TestRequest("/held", .default))
        #expect(first.state.name == "running")
        #expect(queued.state.name == "waiting")
        #expect(free.state.name == "running")
        // The queued task waits for the task sent before it, not for the default task sent after it.
        h.transport.release()
        #expect(queued.state.name == "running")
        #expect(free.state.name == "running")
    }

    // MARK: cancelOthers

    @Test func cancelOthersCancelsRunningWaitingAndRetryingTasksOfItsScope() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", MockTransport.Reply.status(503).after(1))
        let running = h.send(TestRequest("/held"))
        let retrying = h.send(TestRequest("/flaky", retry: APIRetryPolicy(baseDelay: 10, jitter: .none)))
        let waiting = h.send(TestRequest("/held", .waitUntilDone))
        h.clock.advance(by: 1)
        #expect(retrying.state.name == "waitingForRetry")
        #expect(waiting.state.name == "waiting")

        let latest = h.send(TestRequest("/held", .cancelOthers))

        for task in [running, retrying, waiting] {
            #expect(task.state.name == "cancelled(policy)")
            #expect(h.recorder.events(of: task).last == "failed cancelled(policy)")
        }
        #expect(latest.state.name == "running")
        #expect(h.transport.cancelledRequests.count == 1, "only the running attempt was on the wire")
        // The retry timer was cancelled: nothing restarts the cancelled task.
        h.clock.advance(by: 100)
        #expect(retrying.attemptCount == 1)
        #expect(h.records("/flaky").count == 1)
    }

    @Test func cancelOthersLeavesOtherScopesAlone() {
        let h = Harness()
        let other = h.send(TestRequest("/held", scope: "b"))
        let mine = h.send(TestRequest("/held", scope: "a"))
        _ = h.send(TestRequest("/held", .cancelOthers, scope: "a"))
        #expect(mine.state.name == "cancelled(policy)")
        #expect(other.state.name == "running")
    }

    @Test func searchAsYouTypeDeliversOnlyTheLatestQuery() {
        let h = Harness()
        let queries = ["s", "sw", "swi", "swift"].map { _ in h.send(TestRequest("/slow", .cancelOthers)) }
        h.clock.advance(by: 1)
        #expect(queries.dropLast().allSatisfy { $0.state.name == "cancelled(policy)" })
        #expect(queries.last?.state.name == "finished")
        #expect(h.records("/slow").map(\.outcome) == [.cancelled, .cancelled, .cancelled, .completed])
    }

    // MARK: waitUntilDone

    @Test func waitUntilDoneRunsInSendOrderWithoutOverlap() {
        let h = Harness()
        let cart = (0..<4).map { _ in h.send(TestRequest("/slow", .waitUntilDone)) }
        #expect(cart.map(\.state.name) == ["running", "waiting", "waiting", "waiting"])
        h.clock.advance(by: 10)
        #expect(cart.allSatisfy { $0.state.name == "finished" })
        let records = h.records("/slow")
        #expect(records.map(\.sentAt) == [0, 1, 2, 3])
        for (earlier, later) in zip(records, records.dropFirst()) {
            #expect((earlier.endedAt ?? .infinity) <= later.sentAt)
        }
        #expect(h.recorder.events(of: cart[1]) == ["waiting", "start 1", "finished"])
    }

    @Test func waitUntilDoneWaitsForEveryTaskSentBeforeIt() {
        let h = Harness()
        let earlierDefault = h.send(TestRequest("/held"))
        let ordered = h.send(TestRequest("/ok", .waitUntilDone))
        #expect(ordered.state.name == "waiting")
        h.transport.release()
        #expect(earlierDefault.state.name == "finished")
        #expect(ordered.state.name == "finished")
    }

    @Test func cancellingAWaitingTaskLetsTheRestKeepTheirOrder() {
        let h = Harness()
        let first = h.send(TestRequest("/slow", .waitUntilDone))
        let second = h.send(TestRequest("/slow", .waitUntilDone))
        let third = h.send(TestRequest("/slow", .waitUntilDone))
        second.cancel()
        #expect(second.state.name == "cancelled(explicit)")
        #expect(third.state.name == "waiting")
        h.clock.advance(by: 1)
        #expect(first.state.name == "finished")
        #expect(third.state.name == "running")
        #expect(h.recorder.events(of: second) == ["waiting", "failed cancelled(explicit)"])
    }

    @Test func oneCancellationThatFreesSeveralScopesStartsTheNextTaskOfEach() {
        let h = Harness()
        let scopes = ["a", "b", "c", "d"]
        let heads = scopes.map { h.send(TestRequest("/held", .waitUntilDone, scope: $0)) }
        let nexts = scopes.map { h.send(TestRequest("/held", .waitUntilDone, scope: $0)) }
        #expect(nexts.map(\.state.name) == ["waiting", "waiting", "waiting", "waiting"])
        let headIdentifiers = Set(heads.map(\.identifier))

        // One call ends four running tasks, so one transition starts four waiting ones.
        h.manager.cancelTasks { headIdentifiers.contains($0.identifier) }

        #expect(heads.map(\.state.name).allSatisfy { $0 == "cancelled(explicit)" })
        #expect(nexts.map(\.state.name) == ["running", "running", "running", "running"])
        for task in nexts {
            #expect(h.recorder.events(of: task) == ["waiting", "start 1"])
        }
        #expect(h.transport.heldCount == 4)
    }

    // MARK: waitUntilDoneHighPriority

    @Test func highPriorityWaitsForRunningTasksThenStartsBeforeWaitingOnes() {
        let h = Harness()
        let running = h.send(TestRequest("/held", .waitUntilDone))
        let waiting = h.send(TestRequest("/held", .waitUntilDone))
        let urgent = h.send(TestRequest("/held", .waitUntilDoneHighPriority))
        #expect(urgent.state.name == "waiting")
        h.transport.release()  // the first finishes
        #expect(running.state.name == "finished")
        #expect(urgent.state.name == "running")
        #expect(waiting.state.name == "waiting")
        h.transport.release()  // the urgent one finishes
        #expect(waiting.state.name == "running")
    }

    @Test func severalHighPriorityTasksStartNewestFirst() {
        let h = Harness()
        _ = h.send(TestRequest("/held"))
        let older = h.send(TestRequest("/held", .waitUntilDoneHighPriority))
        let newer = h.send(TestRequest("/held", .waitUntilDoneHighPriority))
        h.transport.release()
        #expect(newer.state.name == "running")
        #expect(older.state.name == "waiting")
        h.transport.release()
        #expect(newer.state.name == "finished")
        #expect(older.state.name == "running")
    }

    @Test func highPriorityStartsAtOnceWhenNothingRuns() {
        let h = Harness()
        let task = h.send(TestRequest("/held", .waitUntilDoneHighPriority))
        #expect(task.state.name == "running")
        #expect(h.recorder.events(of: task) == ["start 1"])
    }

    @Test func highPriorityDoesNotWaitForDefaultTasksSentAfterIt() {
        let h = Harness()
        let blocker = h.send(TestRequest("/held"))
        let urgent = h.send(TestRequest("/held", .waitUntilDoneHighPriority))
        let later = h.send(TestRequest("/held"))
        #expect(later.state.name == "running")
        h.transport.release(path: "/held")  // releases the blocker, the oldest held request
        #expect(blocker.state.name == "finished")
        #expect(urgent.state.name == "running")
    }

    // MARK: ignoreCurrent

    @Test func ignoreCurrentIsIgnoredWhileAnythingIsInFlightAndNeverSent() {
        let h = Harness()
        let refresh = h.send(TestRequest("/held", .ignoreCurrent))
        let secondPull = h.send(TestRequest("/held", .ignoreCurrent))
        #expect(refresh.state.name == "running")
        #expect(secondPull.state.name == "ignored")
        #expect(h.recorder.events(of: secondPull) == ["failed ignored"])
        #expect(h.transport.records.count == 1)
        h.transport.release()
        let thirdPull = h.send(TestRequest("/held", .ignoreCurrent))
        #expect(thirdPull.state.name == "running")
    }

    @Test func ignoreCurrentCountsATaskWaitingForRetryAsInFlight() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(500))
        let flaky = h.send(TestRequest("/flaky", retry: APIRetryPolicy(baseDelay: 5, jitter: .none)))
        #expect(flaky.state.name == "waitingForRetry")
        let pull = h.send(TestRequest("/ok", .ignoreCurrent))
        #expect(pull.state.name == "ignored")
    }

    // MARK: Scopes

    @Test(arguments: APIConcurrencyPolicy.allCases)
    func tasksOfDifferentScopesNeverInteract(policy: APIConcurrencyPolicy) {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        let other = h.send(TestRequest("/held", .waitUntilDone, scope: "cart"))
        let task = h.send(TestRequest("/held", policy, scope: "search"))
        // A debounced task always waits its quiet interval first, whatever else is in flight.
        if policy == .debounce || policy == .debounceLatest { h.clock.advance(by: 0.3) }
        #expect(task.state.name == "running")
        #expect(other.state.name == "running")
    }

    @Test func aRetriedAttemptKeepsItsPlaceInTheLine() {
        let h = Harness()
        h.transport.stub(nil, "/add", .status(503), .json("{}"))
        let add = h.send(TestRequest("/add", .waitUntilDone, retry: APIRetryPolicy(baseDelay: 2, jitter: .none)))
        let update = h.send(TestRequest("/ok", .waitUntilDone))
        #expect(add.state.name == "waitingForRetry")
        #expect(update.state.name == "waiting")
        h.clock.advance(by: 2)
        #expect(add.state.name == "finished")
        #expect(update.state.name == "finished")
        #expect(h.transport.records.map(\.path) == ["/add", "/add", "/ok"])
    }

    @Test func aRetriedCancelOthersTaskCancelsNothingNew() {
        let h = Harness()
        h.transport.stub(nil, "/search", .status(503), .json("{}"))
        let search = h.send(TestRequest("/search", .cancelOthers, retry: APIRetryPolicy(baseDelay: 1, jitter: .none)))
        let sibling = h.send(TestRequest("/held"))
        h.clock.advance(by: 1)
        #expect(search.state.name == "finished")
        #expect(search.attemptCount == 2)
        #expect(sibling.state.name == "running")
    }

    @Test func ignoreCurrentIsIgnoredWhileALineWaits() {
        let h = Harness()
        h.send(TestRequest("/held", .waitUntilDone))
        let waiting = h.send(TestRequest("/held", .waitUntilDone))
        let pull = h.send(TestRequest("/held", .ignoreCurrent))
        #expect(waiting.state.name == "waiting")
        #expect(pull.state.name == "ignored")
    }

    @Test func thePolicyAndScopeAreReadOnceWhenTheTaskIsSent() {
        let h = Harness()
        let reads = Locked(0)
        let request = FickleRequest(reads: reads)
        let manager = FickleManager(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let task = manager.send(request)
        h.transport.releaseAll()
        #expect(task.concurrencyPolicy == .waitUntilDone)
        #expect(reads.withLock { $0 } == 1)
    }
}

/// A request whose policy changes every time it is read.
struct FickleRequest: APIRequest {
    let reads: Locked<Int>
    var url: URL { testBaseURL.appendingPathComponent("held") }
    var concurrencyPolicy: APIConcurrencyPolicy {
        reads.withLock {
            $0 += 1
            return $0 == 1 ? .waitUntilDone : .cancelOthers
        }
    }
}

final class FickleManager: APIManager {
    typealias Request = FickleRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}
