// A concurrency group shared by managers and engines (issue 22, item 2): one limit for several
// managers, served by priority then asking order, each manager otherwise its own. The last test runs
// four managers on four engines from four threads (run it under ThreadSanitizer: `.ci/run` does).
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("Concurrency groups", .timeLimit(.minutes(1)))
struct ConcurrencyGroupTests {
    struct ImageRequest: APIRequest {
        var url = testBaseURL
        var path: String
        var priority = 0
        var group: APIConcurrencyPolicy.Group
        var concurrencyGroup: APIConcurrencyPolicy.Group? { group }
    }

    final class ImageManager: APIManager {
        typealias Request = ImageRequest
        typealias Response = Echo
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private func manager(_ transport: MockTransport) -> ImageManager {
        ImageManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
    }

    private func heldTransport() -> MockTransport {
        let transport = MockTransport()
        transport.stub(nil, "/image", MockTransport.Reply.json(#"{"value":"png"}"#).held())
        return transport
    }

    @Test func twoManagersOnTwoEnginesShareOneLimit() {
        let group = APIConcurrencyPolicy.Group(limit: 4)
        let transport = heldTransport()
        let thumbnails = manager(transport)
        let avatars = manager(transport)
        let tasks =
            (0..<10).map { _ in thumbnails.send(ImageRequest(path: "/image", group: group)) }
            + (0..<10).map { _ in avatars.send(ImageRequest(path: "/image", group: group)) }
        var most = 0
        while transport.pendingCount > 0 {
            most = max(most, transport.pendingCount)
            #expect(group.runningCount <= 4)
            _ = transport.release()
        }
        #expect(most == 4)
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
        #expect(group.runningCount == 0 && group.waitingCount == 0)
    }

    @Test func waitingTasksOfAllManagersAreServedByPriorityThenAskingOrder() {
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = heldTransport()
        let first = manager(transport)
        let second = manager(transport)
        let running = first.send(ImageRequest(path: "/image", group: group))
        let low = first.send(ImageRequest(path: "/image", group: group))
        let other = second.send(ImageRequest(path: "/image", group: group))
        let urgent = second.send(ImageRequest(path: "/image", priority: 5, group: group))
        #expect([low, other, urgent].allSatisfy { $0.state.name == "waiting" })
        var order: [AnyAPITask] = []
        _ = transport.release()  // the running one ends
        for _ in 0..<3 {
            order += [low, other, urgent].filter { $0.state.name == "running" && !order.contains($0) }
            _ = transport.release()
        }
        #expect(running.state.name == "finished")
        #expect(order == [urgent, low, other])
    }

    @Test func managersInAGroupStaySeparateInEverythingElse() {
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = heldTransport()
        let first = manager(transport)
        let second = manager(transport)
        let recorder = EventRecorder()
        second.delegate = recorder
        first.send(ImageRequest(path: "/image", group: group))
        let waiting = second.send(ImageRequest(path: "/image", group: group))
        #expect(first.inFlightTasks.count == 1 && second.inFlightTasks.count == 1)
        first.cancelAll()
        #expect(waiting.state.name == "running", "the freed slot went to the other manager's task")
        #expect(recorder.events(of: waiting) == ["waiting", "start 1"])
        transport.releaseAll()
        #expect(waiting.state.name == "finished")
    }

    @Test func aWaitingTaskThatIsCancelledLeavesTheGroupsLine() {
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = heldTransport()
        let images = manager(transport)
        images.send(ImageRequest(path: "/image", group: group))
        let waiting = images.send(ImageRequest(path: "/image", group: group))
        #expect(group.waitingCount == 1)
        waiting.cancel()
        #expect(group.waitingCount == 0)
        transport.releaseAll()
        #expect(group.runningCount == 0)
    }

    @Test func manyCancelledWaitersLeaveTheLineInOrderForTheRest() {
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = heldTransport()
        let images = manager(transport)
        images.send(ImageRequest(path: "/image", group: group))
        var waiting: [APITask<ImageRequest>] = []
        for index in 0..<200 {
            waiting.append(images.send(ImageRequest(path: "/image", priority: index % 3, group: group)))
        }
        for (index, task) in waiting.enumerated() where index % 4 != 0 { task.cancel() }  // 150 leave
        #expect(group.waitingCount == 50)
        var started: [Int] = []
        while transport.release() {
            if let index = waiting.firstIndex(where: { $0.state.name == "running" }) { started.append(index) }
        }
        let kept = (0..<200).filter { $0 % 4 == 0 }
        let expected = kept.sorted { ($0 % 3, -$0) > ($1 % 3, -$1) }
        #expect(started == expected, "by priority, then asking order")
        #expect(group.waitingCount == 0 && group.runningCount == 0)
    }

    @Test func theGroupLinePopsByPriorityThenOrderWhateverTheMix() {
        var random = SystemRandomNumberGenerator()
        var line = GroupLine()
        var reference: [GroupLine.Place] = []
        var order: UInt64 = 0
        for _ in 0..<2_000 {
            if Bool.random(using: &random) || reference.isEmpty {
                order += 1
                let place = GroupLine.Place(priority: Int.random(in: -2...2, using: &random), order: order)
                line.push(place)
                reference.append(place)
            } else {
                guard let best = reference.indices.min(by: { reference[$0].precedes(reference[$1]) }) else { break }
                #expect(line.pop()?.order == reference.remove(at: best).order)
            }
        }
        #expect(line.count == reference.count)
    }

    @Test func aReleasedEnginesSlotGoesToTheNextWaitingTask() {
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = heldTransport()
        var doomed: ImageManager? = manager(transport)
        doomed?.send(ImageRequest(path: "/image", group: group))
        let survivor = manager(transport)
        let waiting = survivor.send(ImageRequest(path: "/image", group: group))
        doomed = nil  // its engine ends its tasks and gives the slot back
        #expect(waiting.state.name == "running")
        transport.releaseAll()
        #expect(group.runningCount == 0)
    }

    @Test func aTaskKeepsItsSlotWhileItWaitsForARetry() {
        let clock = TestClock()
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", .status(503), .json(#"{"value":"ok"}"#))
        transport.stub(nil, "/image", .json(#"{"value":"png"}"#))
        let images = ImageManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        struct Retrying: APIRequest {
            var url = testBaseURL
            var path = "/flaky"
            var group: APIConcurrencyPolicy.Group
            var concurrencyGroup: APIConcurrencyPolicy.Group? { group }
            var retryPolicy: APIRetryPolicy? { APIRetryPolicy(baseDelay: 1, jitter: .none) }
        }
        final class RetryingManager: APIManager {
            typealias Request = Retrying
            typealias Response = Echo
            let engine: APIEngine
            init(engine: APIEngine) { self.engine = engine }
        }
        let retrying = RetryingManager(engine: images.engine)
        let task = retrying.send(Retrying(group: group))
        #expect(task.state.name == "waitingForRetry")
        let other = images.send(ImageRequest(path: "/image", group: group))
        #expect(other.state.name == "waiting", "the retrying task keeps the slot")
        clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(other.state.name == "finished")
    }

    @Test(arguments: [nil, "images"] as [String?])
    func aTaskCancelledDuringItsRetryDelayGivesItsSlotToTheWaitingTask(scope: String?) {
        let clock = TestClock()
        let group = APIConcurrencyPolicy.Group(limit: 1)
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/flaky", .status(503))
        transport.stub(nil, "/image", MockTransport.Reply.json(#"{"value":"png"}"#).held())
        let manager = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        var flaky = TestRequest(
            "/flaky", .waitUntilDone, scope: scope, retry: APIRetryPolicy(baseDelay: 5, jitter: .none))
        flaky.group = group
        var image = TestRequest("/image", .default, scope: scope)
        image.group = group
        let retrying = manager.send(flaky)
        let waiting = manager.send(image)
        #expect(retrying.state.name == "waitingForRetry" && waiting.state.name == "waiting")
        retrying.cancel()
        #expect(waiting.state.name == "running", "the slot went on at once")
        #expect(clock.pendingTimerCount == 0, "the retry timer was cancelled")
        transport.releaseAll()
        #expect(group.runningCount == 0 && group.waitingCount == 0)
    }

    @Test func fourManagersOnFourEnginesFromFourThreadsNeverPassTheLimit() async {
        let group = APIConcurrencyPolicy.Group(limit: 3)
        let transport = MockTransport()
        transport.stub(nil, "/image", .json(#"{"value":"png"}"#))
        let managers = (0..<4).map { _ in
            ImageManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .concurrent()))
        }
        let peak = Locked(0)
        await withTaskGroup(of: Void.self) { tasks in
            for manager in managers {
                tasks.addTask {
                    for index in 0..<50 {
                        var request = ImageRequest(path: "/image", group: group)
                        request.priority = index % 3
                        _ = try? await manager.response(for: request)
                        let running = group.runningCount
                        peak.withLock { $0 = max($0, running) }
                        if index % 10 == 0 { manager.cancelAll() }
                    }
                }
            }
        }
        #expect(peak.withLock { $0 } <= 3)
        #expect(group.runningCount == 0 && group.waitingCount == 0, "every slot came back")
        for manager in managers { #expect(manager.engine.inFlightCount == 0) }
    }
}
