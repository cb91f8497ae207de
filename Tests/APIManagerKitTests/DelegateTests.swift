import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

// MARK: A typed delegate, the way the README shows it

protocol BasketAPIDelegate: APIManagerDelegate {
    func basketAPI(_ api: BasketAPI, didUpdate cart: Echo)
    func basketAPI(_ api: BasketAPI, didFailWith error: APIError)
}

final class BasketAPI: APIManager {
    typealias Request = TestRequest
    typealias Response = Echo
    typealias Delegate = any BasketAPIDelegate
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }

    func task(_ task: APITask<TestRequest>, didFinishWith response: Echo) {
        delegate?.basketAPI(self, didUpdate: response)
    }

    func task(_ task: APITask<TestRequest>, didFailWith error: APIError) {
        delegate?.basketAPI(self, didFailWith: error)
    }
}

final class BasketScreen: BasketAPIDelegate, @unchecked Sendable {
    // @unchecked: only touched on the delivering thread in these tests, read after delivery.
    var updates: [String] = []
    var failures: [String] = []
    var baseStarts = 0
    func basketAPI(_ api: BasketAPI, didUpdate cart: Echo) { updates.append(cart.value ?? "") }
    func basketAPI(_ api: BasketAPI, didFailWith error: APIError) { failures.append(describe(error)) }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) { baseStarts += 1 }
}

@Suite("Delegate and lifecycle", .timeLimit(.minutes(1)))
struct DelegateTests {
    @Test func typedDelegateMethodsReceiveTypedResponses() {
        let h = Harness()
        let api = BasketAPI(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let screen = BasketScreen()
        api.delegate = screen
        h.transport.stub(nil, "/missing", .status(404, body: Data("no route".utf8)))
        api.send(TestRequest("/ok"))
        api.send(TestRequest("/missing"))
        #expect(screen.updates == ["ok"])
        #expect(screen.failures == ["status(404)"])
        #expect(screen.baseStarts == 2, "unforwarded events still reach the base protocol's methods")
    }

    @Test func theDelegateIsHeldWeakly() {
        let h = Harness()
        var screen: BasketScreen? = BasketScreen()
        let api = BasketAPI(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        api.delegate = screen
        #expect(api.delegate != nil)
        screen = nil
        #expect(api.delegate == nil)
    }

    @Test func theBaseHooksFollowAReplacedOrReleasedDelegate() {
        let h = Harness()
        let api = BasketAPI(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let first = BasketScreen()
        var second: BasketScreen? = BasketScreen()
        api.delegate = first
        api.send(TestRequest("/ok"))
        api.delegate = second
        api.send(TestRequest("/ok"))
        #expect(first.baseStarts == 1, "the replaced delegate hears nothing more")
        #expect(second?.baseStarts == 1)
        weak var released = second
        second = nil
        #expect(released == nil, "the engine holds the delegate weakly, as its base protocol too")
        api.send(TestRequest("/ok"))
        api.delegate = nil
        api.send(TestRequest("/ok"))
        #expect(first.baseStarts == 1)
    }

    @Test func eventsArriveOnTheDeliveryQueueInOrder() {
        let h = Harness()
        let queue = DispatchQueue(label: "delegate")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let onQueue = Locked<[Bool]>([])
        h.recorder.onEvent = { _ in onQueue.withLock { $0.append(DispatchQueue.getSpecific(key: key) == true) } }
        h.manager.delivery = .queue(queue)
        let tasks = (0..<3).map { _ in h.send(TestRequest("/slow", .waitUntilDone)) }
        h.clock.advance(by: 3)
        queue.sync {}
        #expect(onQueue.withLock { $0 }.allSatisfy { $0 })
        #expect(h.recorder.events(of: tasks[2]) == ["waiting", "start 1", "finished"])
        let ids = tasks.map(\.identifier)
        #expect(
            h.recorder.events == [
                "\(ids[0]) start 1", "\(ids[1]) waiting", "\(ids[2]) waiting", "\(ids[0]) finished",
                "\(ids[1]) start 1", "\(ids[1]) finished", "\(ids[2]) start 1", "\(ids[2]) finished",
            ])
    }

    @Test func sendingAndCancellingFromInsideACallbackWorks() {
        let h = Harness()
        let manager = h.manager
        let followUps = Locked<[APITask<TestRequest>]>([])
        h.recorder.onEvent = { line in
            guard line.hasSuffix("finished"), followUps.withLock({ $0.count }) < 3 else { return }
            let next = manager.send(TestRequest("/ok"))
            followUps.withLock { $0.append(next) }
            next.cancel()  // already finished: /ok completes inside send
        }
        h.send(TestRequest("/ok"))
        let tasks = followUps.withLock { $0 }
        #expect(tasks.count == 3)
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
    }

    @Test func cancellingFromInsideAStartCallbackEndsTheTaskOnce() {
        let h = Harness()
        let manager = h.manager
        h.recorder.onEvent = { line in
            if line.hasSuffix("start 1") { manager.cancelAll() }
        }
        let task = h.send(TestRequest("/held"))
        #expect(task.state.name == "cancelled(explicit)")
        #expect(h.recorder.events(of: task) == ["start 1", "failed cancelled(explicit)"])
        #expect(h.transport.cancelledRequests.count == 1)
    }

    @Test func everyTaskGetsExactlyOneTerminalEventWhateverHappensAfter() {
        let h = Harness()
        let task = h.send(TestRequest("/held"))
        task.cancel()
        task.cancel()
        h.transport.releaseAll()
        h.manager.cancelAll()
        #expect(h.recorder.events(of: task) == ["start 1", "failed cancelled(explicit)"])
        let done = h.send(TestRequest("/ok"))
        done.cancel()
        #expect(done.state.name == "finished")
        #expect(h.recorder.events(of: done) == ["start 1", "finished"])
    }

    @Test func cancelTasksWhereCancelsOnlyTheMatchingTasks() {
        let h = Harness()
        let keep = h.send(TestRequest("/held", scope: "keep"))
        let drop = h.send(TestRequest("/held", scope: "drop"))
        h.manager.cancelTasks { $0.request.concurrencyScope == "drop" }
        #expect(keep.state.name == "running")
        #expect(drop.state.name == "cancelled(explicit)")
        #expect(h.manager.inFlightTasks.map(\.identifier) == [keep.identifier])
        h.manager.cancelAll()
        #expect(keep.state.name == "cancelled(explicit)")
        #expect(h.manager.engine.inFlightCount == 0)
    }

    @Test func releasingTheManagerCancelsItsTasksWithoutCrashing() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/held", MockTransport.Reply.json("{}").held())
        var manager: TestManager? = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let waiting = manager?.send(TestRequest("/held", .waitUntilDone))
        let queued = manager?.send(TestRequest("/held", .waitUntilDone))
        let engineReference = WeakReference(manager?.engine)
        manager = nil
        #expect(engineReference.object == nil)
        #expect(waiting?.state.name == "cancelled(managerReleased)")
        #expect(queued?.state.name == "cancelled(managerReleased)")
        #expect(transport.cancelledRequests.count == 1)
        transport.releaseAll()  // nothing left to release, nothing to crash
        #expect(clock.pendingTimerCount == 0)
    }

    @Test func aFinishedTaskThatIsStillHeldDoesNotKeepItsResponse() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/big", .json("{}"))
        let manager = TrackingManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/big"))
        #expect(task.state.name == "finished")
        #expect(task.responseSource == .network)
        let delivered = manager.delivered.withLock { $0 }
        #expect(delivered.count == 1)
        // The finish hook had the response and let it go; the task, still held here, does not keep it.
        #expect(delivered.first?.object == nil)
    }

    @Test func aURLRequestHookThatThrowsFailsTheTaskAsAnInvalidRequest() {
        let h = Harness()
        let manager = SigningManager(
            engine: APIEngine(transport: h.transport, clock: h.clock, delivery: .inline, execution: .inline))
        let task = manager.send(TestRequest("/ok"))
        guard case .failed(.invalidRequest(let reason, let underlying)) = task.state else {
            Issue.record("expected invalidRequest, got \(task.state)")
            return
        }
        #expect(reason.contains("URL request"))
        #expect(underlying is SigningManager.MissingKey)
        #expect(h.transport.records.isEmpty)
    }

    @Test func aPathThatCannotFormAURLIsAnInvalidRequestNotACrash() {
        let h = Harness()
        var request = TestRequest("/ok")
        request.url = URL(string: "mailto:someone@example.com")!
        let task = h.send(request)
        // Built or not, it fails (no stub matches it on the mock transport): it never crashes.
        #expect(task.state.name == "invalidRequest" || task.state.name == "transport(-1)")
    }
}

final class SigningManager: APIManager {
    typealias Request = TestRequest
    typealias Response = Echo
    struct MissingKey: Error {}
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
    func urlRequest(for task: APITask<TestRequest>) throws -> URLRequest { throw MissingKey() }
}

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response that is a class, so a test can tell when nothing holds it any more.
final class TrackedResponse: APIResponse {
    let body: Data
    init(from raw: APIRawResponse) throws { body = raw.body }
}

/// Keeps a weak reference to every response its finish hook receives.
final class TrackingManager: APIManager {
    typealias Request = TestRequest
    typealias Response = TrackedResponse
    let engine: APIEngine
    let delivered = Locked<[WeakReference<TrackedResponse>]>([])
    init(engine: APIEngine) { self.engine = engine }
    func task(_ task: APITask<TestRequest>, didFinishWith response: TrackedResponse) {
        delivered.withLock { $0.append(WeakReference(response)) }
    }
}

/// Holds an object weakly, to check that it was released.
final class WeakReference<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object?) { self.object = object }
}
