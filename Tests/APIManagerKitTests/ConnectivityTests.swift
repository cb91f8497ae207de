import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import APIManagerKit

/// A request that waits for the network as long as `wait` says.
private func waiting(
    _ path: String, _ policy: APIConcurrencyPolicy = .default, scope: String? = nil, wait: TimeInterval = .infinity
) -> TestRequest {
    var request = TestRequest(path, policy, scope: scope)
    request.connectivityWait = wait
    return request
}

private let offline = MockTransport.Reply.failure(.notConnectedToInternet)

@Suite("Waiting for connectivity", .timeLimit(.minutes(1)))
struct ConnectivityTests {
    @Test(arguments: [nil, "cart"] as [String?])
    func aTaskSentOfflineWaitsWithoutAnAttemptAndGoesWhenThePathReturns(scope: String?) {
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let h = Harness(connectivity: connectivity)
        let task = h.send(waiting("/ok", .waitUntilDone, scope: scope))
        let behind = h.send(waiting("/ok", .waitUntilDone, scope: scope))
        #expect(task.state.name == "waiting")
        #expect(task.attemptCount == 0)
        #expect(h.transport.records.isEmpty)
        #expect(h.recorder.events(of: task) == [], "the delegate hears of it when it starts")
        #expect(h.recorder.events(of: behind) == ["waiting"])
        #expect(behind.state.name == "waiting", "the line keeps its order behind it")
        h.clock.advance(by: 3_600)
        #expect(h.transport.records.isEmpty, "no probe while the path says it is unreachable")
        connectivity.isReachable = true
        #expect(h.recorder.events(of: task) == ["start 1", "finished"])
        #expect(h.recorder.events(of: behind) == ["waiting", "start 1", "finished"])
        #expect(h.transport.records.count == 2)
    }

    @Test func anOfflineFailureWaitsAndProbesAfterTwoSecondsThenTwiceAsLong() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline, offline, offline, .json(#"{"value":"saved"}"#))
        let task = h.send(waiting("/cart"))
        #expect(task.state.name == "waiting")
        h.clock.advance(by: 1.9)
        #expect(h.records("/cart").count == 1)
        h.clock.advance(by: 0.1)
        #expect(h.records("/cart").count == 2)
        h.clock.advance(by: 4)
        #expect(h.records("/cart").count == 3)
        h.clock.advance(by: 7.9)
        #expect(h.records("/cart").count == 3)
        h.clock.advance(by: 0.1)
        #expect(h.records("/cart").map(\.sentAt) == [0, 2, 6, 14])
        #expect(task.state.name == "finished")
        #expect(task.attemptCount == 4)
        #expect(h.recorder.events(of: task) == ["start 1", "start 2", "start 3", "start 4", "finished"])
    }

    @Test func theProbeDelayStopsDoublingAtSixtySecondsAndStartsAgainAfterAnAnswer() {
        let h = Harness()
        h.transport.stub(
            nil, "/cart", replies: Array(repeating: offline, count: 8) + [.json("{}"), offline, .json("{}")])
        let task = h.send(waiting("/cart"))
        h.clock.advance(by: 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60)
        #expect(h.records("/cart").map(\.sentAt) == [0, 2, 6, 14, 30, 62, 122, 182, 242])
        #expect(task.state.name == "finished")
        let next = h.send(waiting("/cart"))
        h.clock.advance(by: 2)
        #expect(next.state.name == "finished", "an answer set the delay back to 2 s")
    }

    @Test func tasksWaitingForTheNetworkGoInTheOrderTheyWereSent() {
        let h = Harness()
        h.transport.stub(nil, "/a", offline, .json("{}"))
        let tasks =
            [h.send(waiting("/a", .waitUntilDone, scope: "cart"))]
            + ["/b", "/c"].map { h.send(waiting($0, .waitUntilDone, scope: "cart")) }
        h.transport.stub(nil, "/b", .json("{}"))
        h.transport.stub(nil, "/c", .json("{}"))
        #expect(tasks.map(\.state.name) == ["waiting", "waiting", "waiting"])
        h.clock.advance(by: 2)
        #expect(h.transport.records.map(\.path) == ["/a", "/a", "/b", "/c"])
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
    }

    @Test func aTaskThatDoesNotWaitGoesAndFailsAsBeforeWhileOffline() {
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let h = Harness(connectivity: connectivity)
        h.transport.stub(nil, "/x", offline)
        let task = h.send(TestRequest("/x"))
        #expect(task.state.name == "transport(\(URLError.Code.notConnectedToInternet.rawValue))")
        #expect(h.records("/x").count == 1)
    }

    @Test func theWaitLimitEndsTheTaskWithTheErrorThatFoundItOffline() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline)
        let task = h.send(waiting("/cart", wait: 5))
        h.clock.advance(by: 1.9)
        #expect(task.state.name == "waiting")
        h.clock.advance(by: 3.1)
        #expect(task.state.name == "transport(\(URLError.Code.notConnectedToInternet.rawValue))")
        #expect(h.records("/cart").count == 2, "one probe at 2 s, then the limit at 5 s")

        // Sent while the path is gone: it ends with the offline error, never sent.
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let g = Harness(connectivity: connectivity)
        let unsent = g.send(waiting("/ok", wait: 0))
        #expect(unsent.state.name == "transport(\(URLError.Code.notConnectedToInternet.rawValue))")
        #expect(g.transport.records.isEmpty)
    }

    @Test func aLimitThatPassesDuringAProbesAttemptEndsTheTaskIfThatAttemptFindsTheNetworkGone() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline, offline.after(2))
        let task = h.send(waiting("/cart", wait: 3))
        h.clock.advance(by: 2)
        #expect(task.state.name == "running", "the probe's attempt")
        h.clock.advance(by: 1)
        #expect(task.state.name == "running", "the limit passed while it runs: it goes on")
        h.clock.advance(by: 1)
        #expect(task.state.name == "transport(\(URLError.Code.notConnectedToInternet.rawValue))")
        #expect(h.records("/cart").map(\.sentAt) == [0, 2])
    }

    @Test func reachingAServerStartsTheNextWaitsLimitAfresh() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline, .status(503), offline, .json("{}"))
        var request = waiting("/cart", wait: 5)
        request.retryPolicy = APIRetryPolicy(maxAttempts: 3, baseDelay: 2, jitter: .none)
        let task = h.send(request)
        h.clock.advance(by: 2)  // the probe reaches the server: 503, a retry in 2 s
        h.clock.advance(by: 2)  // the retry finds the network gone: a new wait of 5 s from now
        #expect(task.state.name == "waiting")
        h.clock.advance(by: 1.9)  // 5.9 s after the first wait began (its limit was 5 s): not ended
        #expect(task.state.name == "waiting")
        h.clock.advance(by: 0.1)  // the probe, 2 s after the second failure (an answer reset its delay)
        #expect(task.state.name == "finished")
        #expect(h.records("/cart").map(\.sentAt) == [0, 2, 4, 6])
    }

    @Test func cancellingOrTheDeadlineEndsAWaitingTask() {
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let h = Harness(connectivity: connectivity)
        let cancelled = h.send(waiting("/ok", scope: "a"))
        var timed = waiting("/ok", scope: "b")
        timed.deadline = 10
        let timesOut = h.send(timed)
        cancelled.cancel()
        #expect(cancelled.state.name == "cancelled(explicit)")
        h.clock.advance(by: 10)
        #expect(timesOut.state.name == "timedOut")
        connectivity.isReachable = true
        #expect(h.transport.records.isEmpty)
        #expect(h.recorder.events(of: cancelled) == ["failed cancelled(explicit)"])
    }

    @Test func attemptsThatFoundTheNetworkGoneDoNotCountAgainstTheRetryPolicy() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline, offline, .status(503), .json("{}"))
        var request = waiting("/cart")
        request.retryPolicy = APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)
        let task = h.send(request)
        h.clock.advance(by: 2 + 4 + 1)
        #expect(h.records("/cart").map(\.sentAt) == [0, 2, 6, 7])
        #expect(task.state.name == "finished")
        #expect(task.attemptCount == 4)
    }

    @Test func anAnswerToAnyTaskBringsTheWaitingOnesBackAtOnce() {
        let h = Harness()
        h.transport.stub(nil, "/cart", offline, .json("{}"))
        let cart = h.send(waiting("/cart", scope: "cart"))
        #expect(cart.state.name == "waiting")
        h.send(TestRequest("/ok", scope: "feed"))
        #expect(cart.state.name == "finished")
        #expect(h.records("/cart").map(\.sentAt) == [0, 0])
    }

    @Test func thePathMayReturnFromAnotherThread() {
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let h = Harness(connectivity: connectivity)
        let tasks = (0..<20).map { h.send(waiting("/ok", scope: "s\($0 % 3)")) }
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            connectivity.isReachable = index % 2 == 0
        }
        connectivity.isReachable = true
        #expect(tasks.allSatisfy { $0.state.name == "finished" })
        #expect(h.transport.records.count == 20)
    }

    @Test func aDurableTaskWaitsOnDiskAndItsRecordGoesWhenItFinallyFinishes() {
        let folder = TemporaryFolder()
        let h = Harness(durableStore: APIEngine.DurableStore(directory: folder.url))
        h.transport.stub(nil, "/add", offline, .json("{}"))
        var add = TestRequest("/add", .durable, scope: "cart", method: .post)
        add.idempotencyKey = .standard
        let task = h.send(add)
        #expect(task.state.name == "waiting", "durable: waits for the network unless told otherwise")
        let scopeFolder = folder.url.appendingPathComponent(DurableScopeFolder.folderName(of: "cart"))
        #expect(
            (try? FileManager.default.contentsOfDirectory(atPath: scopeFolder.path))?.contains(
                "00000000000000000001.task") == true)
        h.clock.advance(by: 2)
        #expect(task.state.name == "finished")
        let keys = h.records("/add").map { $0.request.value(forHTTPHeaderField: "Idempotency-Key") }
        #expect(keys.count == 2 && keys[0] == keys[1] && keys[0] != nil)
        #expect(
            (try? FileManager.default.contentsOfDirectory(atPath: scopeFolder.path))?.contains(
                "00000000000000000001.task") == false)
    }

    @Test func onlyTheDocumentedErrorsSayTheNetworkIsGone() {
        let offlineCodes: [URLError.Code] = [
            .notConnectedToInternet, .networkConnectionLost, .cannotFindHost, .dnsLookupFailed, .dataNotAllowed,
            .internationalRoamingOff, .callIsActive,
        ]
        for code in offlineCodes {
            #expect(APIEngine.isOfflineError(.transport(underlying: URLError(code))), "\(code)")
        }
        for code: URLError.Code in [
            .timedOut, .cannotConnectToHost, .badServerResponse, .cancelled, .secureConnectionFailed,
        ] {
            #expect(!APIEngine.isOfflineError(.transport(underlying: URLError(code))), "\(code)")
        }
        #expect(!APIEngine.isOfflineError(.unacceptableStatus(APIRawResponse(statusCode: 503))))
        #expect(!APIEngine.isOfflineError(.transport(underlying: POSIXError(.ENETUNREACH))))
    }
}

/// Records the network waits and the starts and ends a delegate hears, as lines.
private final class NetworkWaitRecorder: APIManagerDelegate, @unchecked Sendable {
    let lines = Locked<[String]>([])
    func apiManager(_ manager: any APIManager, taskIsWaitingForNetwork task: AnyAPITask) {
        lines.withLock { $0.append("waits for the network") }
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {
        lines.withLock { $0.append("start \(attempt)") }
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        lines.withLock { $0.append("finished") }
    }
}

@Suite("The delegate hears each wait for the network")
struct NetworkWaitDelegateTests {
    @Test(arguments: [nil, "cart"] as [String?])
    func sentOfflineThenFoundOfflineAgainItHearsEachWaitBeforeTheStartThatEndsIt(scope: String?) {
        let connectivity = MockTransport.Connectivity(isReachable: false)
        let h = Harness(connectivity: connectivity)
        h.transport.stub(nil, "/away", .failure(.notConnectedToInternet), .json("{}"))
        let recorder = NetworkWaitRecorder()
        h.manager.delegate = recorder
        h.manager.send(waiting("/away", scope: scope))
        #expect(recorder.lines.withLock { $0 } == ["waits for the network"])
        connectivity.isReachable = true  // goes, and its attempt finds the network gone
        #expect(recorder.lines.withLock { $0 } == ["waits for the network", "start 1", "waits for the network"])
        h.clock.advance(by: 2)  // the probe: it goes again and is answered
        #expect(
            recorder.lines.withLock { $0 } == [
                "waits for the network", "start 1", "waits for the network", "start 2", "finished",
            ])
    }

    @Test func aTaskThatDoesNotWaitForTheNetworkNeverHearsIt() {
        let h = Harness(connectivity: MockTransport.Connectivity(isReachable: false))
        h.transport.stub(nil, "/away", .failure(.notConnectedToInternet))
        let recorder = NetworkWaitRecorder()
        h.manager.delegate = recorder
        h.manager.send(TestRequest("/away"))
        #expect(recorder.lines.withLock { $0 } == ["start 1"])
    }
}
