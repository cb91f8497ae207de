import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An interceptor made of closures: an adapter and an inspector.
struct ClosureInterceptor: APIRequestAdapter, APIResponseInspector {
    var onAdapt: @Sendable (URLRequest, APIAttempt) async throws -> URLRequest = { request, _ in request }
    var onInspect: @Sendable (APIRawResponse, APIAttempt) async throws -> APIResponseDisposition = { _, _ in .proceed }

    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
        try await onAdapt(request, attempt)
    }

    func inspect(_ response: APIRawResponse, to request: URLRequest, for attempt: APIAttempt) async throws
        -> APIResponseDisposition
    {
        try await onInspect(response, attempt)
    }
}

/// Suspends whoever waits on it until the test opens it; a cancelled waiter is let go at once and
/// counted.
final class Gate: @unchecked Sendable {
    // @unchecked: `waiters` and `cancelled` are only touched under `lock`.
    private let lock = NSLock()
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var cancelled = 0

    var waitingCount: Int { lock.withLock { waiters.count } }
    var cancelledCount: Int { lock.withLock { cancelled } }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                lock.withLock { waiters.append(continuation) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = lock.withLock {
                cancelled += 1
                return waiters.isEmpty ? nil : waiters.removeFirst()
            }
            continuation?.resume()
        }
    }

    /// Lets every waiter go.
    func open() {
        let all: [CheckedContinuation<Void, Never>] = lock.withLock {
            defer { waiters = [] }
            return waiters
        }
        for continuation in all { continuation.resume() }
    }
}

@Suite("Interceptors: adapt before each attempt, inspect before validation", .timeLimit(.minutes(1)))
struct InterceptorTests {
    @Test func adaptRunsBeforeEachAttemptInOrderWithAFreshValue() {
        let counter = Locked(0)
        let signer = ClosureInterceptor(onAdapt: { request, attempt in
            var request = request
            let value = counter.withLock { count -> Int in
                count += 1
                return count
            }
            request.setValue("sig-\(value)-attempt-\(attempt.number)", forHTTPHeaderField: "X-Signature")
            return request
        })
        let second = ClosureInterceptor(onAdapt: { request, _ in
            var request = request
            // Runs after the signer: sees its header.
            request.setValue(request.value(forHTTPHeaderField: "X-Signature") ?? "none", forHTTPHeaderField: "X-Seen")
            return request
        })
        let harness = Harness(interceptors: [signer, second])
        harness.transport.stub(nil, "/flaky", .status(503), .json(#"{"value":"ok"}"#))
        harness.send(TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        harness.clock.advance(by: 1)

        let sent = harness.records("/flaky").map { $0.request.value(forHTTPHeaderField: "X-Signature") }
        #expect(sent == ["sig-1-attempt-1", "sig-2-attempt-2"])
        #expect(harness.records("/flaky").map { $0.request.value(forHTTPHeaderField: "X-Seen") } == sent)
        #expect(harness.recorder.events == ["1 start 1", "1 retry 1.0", "1 start 2", "1 finished"])
    }

    @Test func theSynchronousHooksStillRunBeforeTheInterceptors() {
        let harness = Harness()
        let interceptor = ClosureInterceptor(onAdapt: { request, _ in
            var request = request
            request.setValue(
                (request.value(forHTTPHeaderField: "X-Hook") ?? "missing") + "+adapted", forHTTPHeaderField: "X-Hook")
            return request
        })
        let manager = RequestHookManager(harness, interceptors: [interceptor]) { task in
            var request = try task.request.makeURLRequest()
            request.setValue("hook", forHTTPHeaderField: "X-Hook")
            return request
        }
        manager.send(TestRequest("/ok"))
        #expect(harness.records("/ok").map { $0.request.value(forHTTPHeaderField: "X-Hook") } == ["hook+adapted"])
    }

    @Test func anAdaptThatThrowsFailsTheAttemptAsAnInvalidRequest() {
        struct KeychainLocked: Error {}
        let harness = Harness(interceptors: [ClosureInterceptor(onAdapt: { _, _ in throw KeychainLocked() })])
        let task = harness.send(TestRequest("/ok"))
        #expect(harness.records("/ok").isEmpty)
        guard case .failed(.invalidRequest(_, let underlying?)) = task.state else {
            Issue.record("expected invalidRequest, got \(task.state)")
            return
        }
        #expect(underlying is KeychainLocked)
        #expect(harness.recorder.events == ["1 start 1", "1 failed invalidRequest"])
    }

    @Test func anAPIErrorThrownByAdaptIsPassedThroughAndRetriedByTheUsualRules() {
        let failures = Locked(1)
        let harness = Harness(interceptors: [
            ClosureInterceptor(onAdapt: { request, _ in
                let fail = failures.withLock { count -> Bool in
                    defer { count -= 1 }
                    return count > 0
                }
                if fail { throw APIError.transport(underlying: URLError(.notConnectedToInternet)) }
                return request
            })
        ])
        harness.send(TestRequest("/ok", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 2, jitter: .none)))
        #expect(harness.recorder.events == ["1 start 1", "1 retry 2.0"])
        harness.clock.advance(by: 2)
        #expect(harness.recorder.events == ["1 start 1", "1 retry 2.0", "1 start 2", "1 finished"])
        #expect(harness.records("/ok").count == 1)
    }

    @Test func inspectSeesTheRawResponseBeforeValidation() {
        let seen = Locked<[Int]>([])
        let harness = Harness(interceptors: [
            ClosureInterceptor(onInspect: { response, _ in
                seen.withLock { $0.append(response.statusCode) }
                return .proceed
            })
        ])
        harness.transport.stub(nil, "/missing", .status(404))
        harness.send(TestRequest("/missing"))
        harness.send(TestRequest("/ok"))
        #expect(seen.withLock { $0 } == [404, 200])
        #expect(harness.recorder.events == ["1 start 1", "1 failed status(404)", "2 start 1", "2 finished"])
    }

    @Test func inspectCanAskForAnotherAttemptUnderTheUsualRules() {
        // A server that answers 200 with a "try again" body: the interceptor asks twice, then lets it through.
        let harness = Harness(interceptors: [
            ClosureInterceptor(onInspect: { _, attempt in
                attempt.number < 3 ? .retry(after: 0.5) : .proceed
            })
        ])
        let task = harness.send(TestRequest("/ok"))
        #expect(task.state.name == "waitingForRetry")
        harness.clock.advance(by: 0.5)
        harness.clock.advance(by: 0.5)
        #expect(
            harness.recorder.events == [
                "1 start 1", "1 retry 0.5", "1 start 2", "1 retry 0.5", "1 start 3", "1 finished",
            ])
        #expect(task.attemptCount == 3)
        #expect(harness.records("/ok").count == 3)
    }

    @Test func aRetryAskedForByInspectIsStillBoundedByTheDeadline() {
        let harness = Harness(interceptors: [ClosureInterceptor(onInspect: { _, _ in .retry(after: 1) })])
        let task = harness.send(TestRequest("/ok", deadline: 2.5))
        harness.clock.advance(by: 5)
        #expect(task.state.name == "timedOut")
        #expect(harness.records("/ok").count == 3)  // at 0, 1 and 2 s
    }

    @Test func aRetryAskedForWithADelayThatIsNotFiniteEndsTheTask() {
        let harness = Harness(interceptors: [ClosureInterceptor(onInspect: { _, _ in .retry(after: .infinity) })])
        let task = harness.send(TestRequest("/ok"))
        guard case .failed(.rejected(let underlying, let response)) = task.state else {
            Issue.record("expected rejected, got \(task.state)")
            return
        }
        #expect((underlying as? APIRetryRequested)?.delay == .infinity)
        #expect(response.statusCode == 200)
    }

    @Test func anInspectThatThrowsFailsTheAttemptWithItsError() {
        struct Tampered: Error {}
        let harness = Harness(interceptors: [ClosureInterceptor(onInspect: { _, _ in throw Tampered() })])
        let task = harness.send(TestRequest("/ok"))
        guard case .failed(.rejected(let underlying, _)) = task.state else {
            Issue.record("expected rejected, got \(task.state)")
            return
        }
        #expect(underlying is Tampered)
    }

    @Test func theFirstInspectorAskingForARetryDecidesAndTheRestAreSkipped() {
        let later = Locked(0)
        let harness = Harness(interceptors: [
            ClosureInterceptor(onInspect: { _, attempt in attempt.number == 1 ? .retry(after: 0) : .proceed }),
            ClosureInterceptor(onInspect: { _, _ in
                later.withLock { $0 += 1 }
                return .proceed
            }),
        ])
        harness.send(TestRequest("/ok"))
        #expect(harness.recorder.events == ["1 start 1", "1 retry 0.0", "1 start 2", "1 finished"])
        #expect(later.withLock { $0 } == 1)
    }

    @Test func cancellingWhileAnInterceptorWaitsEndsTheTaskAtOnceAndIgnoresItsLateAnswer() {
        let gate = Gate()
        let harness = Harness(interceptors: [
            ClosureInterceptor(onAdapt: { request, _ in
                await gate.wait()
                return request
            })
        ])
        let task = harness.send(TestRequest("/ok"))
        #expect(gate.waitingCount == 1)
        #expect(task.state.name == "running")
        #expect(harness.manager.engine.inFlightCount == 1)

        task.cancel()
        #expect(task.state.name == "cancelled(explicit)")
        #expect(harness.recorder.events == ["1 start 1", "1 failed cancelled(explicit)"])
        // The interceptor's Swift task was cancelled, and what it returned after is ignored.
        #expect(gate.cancelledCount == 1)
        gate.open()
        #expect(harness.transport.records.isEmpty)
        #expect(harness.recorder.events == ["1 start 1", "1 failed cancelled(explicit)"])
    }

    @Test func cancellingWhileAnInspectorWaitsEndsTheTaskOnce() {
        let gate = Gate()
        let harness = Harness(interceptors: [
            ClosureInterceptor(onInspect: { _, _ in
                await gate.wait()
                return .proceed
            })
        ])
        let task = harness.send(TestRequest("/ok"))
        #expect(gate.waitingCount == 1)
        task.cancel()
        gate.open()
        #expect(harness.recorder.events == ["1 start 1", "1 failed cancelled(explicit)"])
        #expect(gate.cancelledCount == 1)
    }

    @Test func aSuspendedInterceptorResumesTheAttemptWhereItIsResumed() {
        let gate = Gate()
        let harness = Harness(interceptors: [
            ClosureInterceptor(onAdapt: { request, _ in
                await gate.wait()
                var request = request
                request.setValue("late", forHTTPHeaderField: "X-Read")
                return request
            })
        ])
        harness.send(TestRequest("/ok"))
        #expect(harness.transport.records.isEmpty)
        gate.open()  // inline: the attempt goes on inside this call
        #expect(harness.records("/ok").map { $0.request.value(forHTTPHeaderField: "X-Read") } == ["late"])
        #expect(harness.recorder.events == ["1 start 1", "1 finished"])
    }

    @Test func aHeaderAnInterceptorSetsIsCheckedLikeAnyOther() {
        let harness = Harness(interceptors: [
            ClosureInterceptor(onAdapt: { request, _ in
                var request = request
                request.setValue("yes", forHTTPHeaderField: "X-Probe\r\nX-Injected: yes\r\nX-Other")
                return request
            })
        ])
        let task = harness.send(TestRequest("/ok"))
        #expect(task.state.name == "invalidRequest")
        #expect(harness.transport.records.isEmpty)
    }

    @Test func anAdapterOnlyAdaptsAnInspectorOnlyInspectsAndEachChainKeepsItsOrder() {
        struct Tag: APIRequestAdapter {
            let name: String
            func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
                var request = request
                request.setValue(
                    (request.value(forHTTPHeaderField: "X-Tags") ?? "") + name, forHTTPHeaderField: "X-Tags")
                return request
            }
        }
        struct Count: APIResponseInspector {
            let seen: Locked<[String]>
            let name: String
            func inspect(_ response: APIRawResponse, to request: URLRequest, for attempt: APIAttempt) async throws
                -> APIResponseDisposition
            {
                seen.withLock { $0.append(name) }
                return .proceed
            }
        }
        struct Neither: APIInterceptor {}
        let seen = Locked<[String]>([])
        let harness = Harness(interceptors: [
            Tag(name: "a"), Count(seen: seen, name: "x"), Neither(), Tag(name: "b"), Count(seen: seen, name: "y"),
        ])
        harness.send(TestRequest("/ok"))
        #expect(harness.records("/ok").map { $0.request.value(forHTTPHeaderField: "X-Tags") } == ["ab"])
        #expect(seen.withLock { $0 } == ["x", "y"])
        #expect(harness.recorder.events == ["1 start 1", "1 finished"])
        #expect(harness.manager.engine.interceptors.count == 5)
    }

    @Test func withAdaptersOnlyTheResponseTakesTheUsualPath() {
        let gate = Gate()
        struct Waiting: APIRequestAdapter {
            let gate: Gate
            func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
                await gate.wait()
                return request
            }
        }
        let harness = Harness(interceptors: [Waiting(gate: gate)])
        harness.transport.stub(nil, "/missing", .status(404))
        let task = harness.send(TestRequest("/missing"))
        #expect(harness.transport.records.isEmpty)
        gate.open()
        #expect(task.state.name == "status(404)")
        #expect(harness.recorder.events == ["1 start 1", "1 failed status(404)"])
    }

    @Test func interceptorsWorkOnAQueueEngine() async throws {
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let tagger = ClosureInterceptor(
            onAdapt: { request, _ in
                var request = request
                request.setValue("queue", forHTTPHeaderField: "X-Mode")
                return request
            },
            onInspect: { _, attempt in attempt.number == 1 ? .retry(after: 0) : .proceed })
        let manager = TestManager(engine: APIEngine(transport: transport, delivery: .inline, interceptors: [tagger]))
        let response = try await manager.response(for: TestRequest("/ok"))
        #expect(response.value == "ok")
        #expect(transport.requests.map { $0.value(forHTTPHeaderField: "X-Mode") } == ["queue", "queue"])
    }
}
