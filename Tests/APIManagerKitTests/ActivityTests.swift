// Observable state (issue 44, item 3): `APIEngine.Activity` (an engine's, a scope's, a manager's
// tasks by state, the network, a durable line's backlog and stop) and `AnyAPITask.Status` (one task's
// state, attempts and progress), observed with `withObservationTracking` on the virtual clock, on the
// main actor where they change.
import APIManagerKitTesting
import Dispatch
import Foundation
import Observation
import Testing

@testable import APIManagerKit

/// Counts the changes `withObservationTracking` reports for what `read` reads (tracking again after
/// each, as SwiftUI does).
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor private final class ChangeCounter {
    private(set) var changes = 0
    private let read: @MainActor () -> Void

    init(_ read: @escaping @MainActor () -> Void) {
        self.read = read
        track()
    }

    private func track() {
        withObservationTracking {
            read()
        } onChange: { [weak self] in
            // Told before the value changes (willSet), on the thread that changes it: the main actor.
            MainActor.assumeIsolated {
                self?.changes += 1
                DispatchQueue.main.async { self?.track() }
            }
        }
    }
}

@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor private func figures(_ activity: APIEngine.Activity) -> [Int] {
    [activity.inFlight, activity.running, activity.waiting, activity.waitingForRetry, activity.waitingForNetwork]
}

@Suite("Observable state: an engine's activity and a task's status", .timeLimit(.minutes(1)))
@MainActor struct ActivityTests {
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test(arguments: [nil, "cart"] as [String?])
    func aLineOfThreeIsCountedByStateAsItMovesAndAnEndedOneIsGone(scope: String?) {
        let h = Harness()
        let activity = h.manager.engine.activity
        let scoped = h.manager.engine.activity(inScope: scope)
        #expect(figures(activity) == [0, 0, 0, 0, 0] && !activity.isBusy)
        let tracked = Locked(0)
        withObservationTracking {
            _ = activity.inFlight
        } onChange: {
            tracked.withLock { $0 += 1 }
        }
        for _ in 0..<3 { h.manager.send(TestRequest("/slow", .waitUntilDone, scope: scope)) }
        #expect(tracked.withLock { $0 } == 1, "told that inFlight changes")
        #expect(figures(activity) == [3, 1, 2, 0, 0] && activity.isBusy)
        #expect(figures(scoped) == [3, 1, 2, 0, 0])
        h.clock.advance(by: 1)
        #expect(figures(activity) == [2, 1, 1, 0, 0])
        h.clock.advance(by: 2)
        #expect(figures(activity) == [0, 0, 0, 0, 0] && !activity.isBusy)
        #expect(figures(h.manager.engine.activity(inScope: "elsewhere")) == [0, 0, 0, 0, 0])
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aModelIsToldOnlyOfWhatChangesAndTheSameOneIsGivenWhileHeld() {
        let h = Harness()
        let activity = h.manager.engine.activity
        #expect(h.manager.engine.activity === activity)
        let counter = ChangeCounter { _ = activity.waitingForRetry }
        h.manager.send(TestRequest("/ok"))
        #expect(counter.changes == 0, "a task that ran and ended changes no retry count")
        #expect(activity.inFlight == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aRetryIsCountedWhileItWaits() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(503), .json("{}"))
        let activity = h.manager.engine.activity
        h.manager.send(TestRequest("/flaky", retry: APIRetryPolicy(baseDelay: 2, jitter: .none)))
        #expect(figures(activity) == [1, 0, 0, 1, 0])
        h.clock.advance(by: 2)
        #expect(figures(activity) == [0, 0, 0, 0, 0])
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aManagersModelCountsItsTasksAloneOnASharedEngine() {
        let h = Harness()
        let other = TestManager(engine: h.manager.engine)
        let mine = h.manager.activity
        let theirs = other.activity
        h.manager.send(TestRequest("/slow"))
        other.send(TestRequest("/slow", scope: "b"))
        other.send(TestRequest("/slow", scope: "c"))
        #expect(mine.inFlight == 1 && theirs.inFlight == 2 && h.manager.engine.activity.inFlight == 3)
        h.clock.advance(by: 1)
        #expect(mine.inFlight == 0 && theirs.inFlight == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aClientsModelCountsItsTasksOfEveryTypeAlone() {
        let h = Harness()
        let client = APIClient(engine: h.manager.engine)
        let other = APIClient(engine: h.manager.engine)
        client.send(ProgressRequest(path: "/slow"))
        client.send(SlowCount())
        other.send(SlowCount())
        h.manager.send(TestRequest("/slow", scope: "mine"))
        #expect(client.activity.inFlight == 2 && other.activity.inFlight == 1 && h.manager.activity.inFlight == 1)
        #expect(client.activity === client.activity)
        h.clock.advance(by: 1)
        #expect(client.activity.inFlight == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func theNetworkGoesOfflineAndBackAndTasksThatWaitForItAreCounted() {
        let connectivity = MockTransport.Connectivity(isReachable: true)
        let h = Harness(connectivity: connectivity)
        let activity = h.manager.engine.activity
        #expect(activity.network == .online)
        let tracked = Locked(0)
        withObservationTracking {
            _ = activity.network
        } onChange: {
            tracked.withLock { $0 += 1 }
        }
        connectivity.isReachable = false
        #expect(activity.network == .offline && tracked.withLock { $0 } == 1, "said without any task")
        var request = TestRequest("/ok")
        request.connectivityWait = .infinity
        h.manager.send(request)
        #expect(figures(activity) == [1, 0, 1, 0, 1])
        connectivity.isReachable = true
        #expect(activity.network == .online)
        #expect(figures(activity) == [0, 0, 0, 0, 0])
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func anAttemptThatFindsTheNetworkGoneMakesItProbingUntilOneAnswers() {
        let h = Harness()
        h.transport.stub(nil, "/away", .failure(.notConnectedToInternet), .json("{}"))
        let activity = h.manager.engine.activity
        var request = TestRequest("/away")
        request.connectivityWait = .infinity
        h.manager.send(request)
        #expect(activity.network == .probing)
        #expect(activity.waitingForNetwork == 1)
        h.clock.advance(by: 2)  // the first probe
        #expect(activity.network == .online && activity.inFlight == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aDurableScopeShowsItsPendingEditsAndAStopByARefusal() throws {
        let folder = TemporaryFolder("activity-durable")
        let store = APIEngine.DurableStore(directory: folder.url, scopesWhenRefused: ["cart": .stopTheLine])
        let h = Harness(durableStore: store)
        h.transport.stub(nil, "/edit", .failure(.notConnectedToInternet))
        let cart = h.manager.engine.activity(inScope: "cart")
        for _ in 0..<3 { h.manager.send(TestRequest("/edit", .durable, scope: "cart", method: .post)) }
        #expect(cart.durablePending == 3 && cart.waitingForNetwork == 1 && !cart.isStoppedByRefusal)
        #expect(h.manager.engine.activity(inScope: "other").durablePending == 0)
        h.transport.stub(nil, "/edit", .status(422), .json("{}"))
        h.clock.advance(by: 2)
        #expect(cart.isStoppedByRefusal, "a final refusal stops the line")
        #expect(cart.durablePending == 2, "the refused edit is kept aside; two wait behind it")
        _ = try h.manager.resolveRefusedDurableTask(inScope: "cart", by: .drop)
        h.clock.runUntilIdle()
        #expect(!cart.isStoppedByRefusal && cart.durablePending == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aTasksStatusFollowsItsStateAttemptsAndProgress() {
        let h = Harness()
        h.transport.stub(nil, "/flaky", .status(503), MockTransport.Reply.json(#"{"value":"x"}"#).after(1))
        let client = APIClient(engine: h.manager.engine)
        let task = client.send(ProgressRequest(path: "/flaky"))
        let status = task.status
        #expect(task.status === status)
        #expect(status.state == .waitingForRetry && status.attemptCount == 1)
        let tracked = Locked(0)
        withObservationTracking {
            _ = status.state
        } onChange: {
            tracked.withLock { $0 += 1 }
        }
        h.clock.advance(by: 2)
        #expect(status.state == .running && status.attemptCount == 2 && tracked.withLock { $0 } == 1)
        h.clock.advance(by: 1)
        #expect(status.state == .finished)
        #expect(status.progress?.isComplete == true, "the final download report")
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func aModelNobodyHoldsIsNoLongerFedAndAFreshOneStartsFromNow() {
        let h = Harness()
        weak var gone: APIEngine.Activity?
        do {
            let activity = h.manager.engine.activity
            gone = activity
            h.manager.send(TestRequest("/slow"))
            #expect(activity.inFlight == 1)
        }
        #expect(gone == nil)
        h.clock.advance(by: 1)
        #expect(h.manager.engine.state.withLock { $0.modelFeeds.filter { !$0.isGone }.count } == 0)
        #expect(h.manager.engine.activity.inFlight == 0)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func manyChangesOnTheWorkQueuesHopToTheMainActorOneAtATimeAndEndAtTheLastFigures() async {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json("{}"))
        let manager = TestManager(
            engine: APIEngine(
                transport: transport, delivery: .queue(DispatchQueue(label: "hops")),
                execution: .concurrent(label: "hops")))
        let activity = manager.activity
        let count = 100
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let remaining = Locked(count)
            DispatchQueue.global().async {
                DispatchQueue.concurrentPerform(iterations: count) { _ in
                    manager.send(TestRequest("/ok")) { _ in
                        if remaining.withLock({
                            $0 -= 1
                            return $0
                        }) == 0 {
                            continuation.resume()
                        }
                    }
                }
            }
        }
        // The last change's hop may still be on its way: wait for the figures to settle at 0.
        while activity.inFlight != 0 { await Task.yield() }
        #expect(figures(activity) == [0, 0, 0, 0, 0])
        #expect(manager.engine.state.withLock { $0.activityRefreshIsQueued } == false)
    }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @Test func withADeliveryOffTheMainQueueTheModelChangesOnTheMainActor() async {
        let transport = MockTransport()
        transport.stub(nil, "/ok", MockTransport.Reply.json("{}").held())
        let manager = TestManager(
            engine: APIEngine(transport: transport, delivery: .queue(DispatchQueue(label: "off-main"))))
        let activity = manager.activity
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            withObservationTracking {
                _ = activity.inFlight
            } onChange: {
                #expect(MainQueueMark.isCurrent)
                continuation.resume()
            }
            manager.send(TestRequest("/ok"))
        }
        #expect(activity.inFlight == 1)
        transport.releaseAll()
    }
}

/// A GET that reports its progress and retries a 503 after 2 s.
private struct ProgressRequest: APIClient.Endpoint {
    typealias Response = Echo
    var url = testBaseURL
    var path: String
    var reportsProgress: Bool { true }
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(baseDelay: 2, jitter: .none) }
}

/// A slow GET of another endpoint type.
private struct SlowCount: APIClient.Endpoint {
    typealias Response = APIRawResponse
    var url = testBaseURL
    var path: String { "/slow" }
    var concurrencyScope: String? { "count" }
}
