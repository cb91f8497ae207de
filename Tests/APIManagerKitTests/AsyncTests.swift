import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

@Suite("Async sending", .timeLimit(.minutes(1)))
struct AsyncTests {
    @Test func responseForReturnsTheTypedResponse() async throws {
        let h = Harness()
        let response = try await h.manager.response(for: TestRequest("/ok"))
        #expect(response == Echo(value: "ok"))
    }

    @Test func responseForThrowsTheTasksAPIError() async {
        let h = Harness()
        h.transport.stub(nil, "/missing", .status(404, body: Data("no route".utf8)))
        await #expect(throws: APIError.self) { try await h.manager.response(for: TestRequest("/missing")) }
        do {
            _ = try await h.manager.response(for: TestRequest("/missing"))
        } catch {
            #expect(error.statusCode == 404)
            #expect(String(decoding: error.responseBody ?? Data(), as: UTF8.self) == "no route")
        }
    }

    @Test func cancellingTheSwiftTaskCancelsTheAPITask() async {
        let h = Harness()
        let manager = h.manager
        let waiter = Task { () -> String in
            do throws(APIError) {
                _ = try await manager.response(for: TestRequest("/held"))
                return "finished"
            } catch {
                return describe(error)
            }
        }
        while h.transport.heldCount == 0 { await Task.yield() }
        waiter.cancel()
        #expect(await waiter.value == "cancelled(concurrency)")
        #expect(h.transport.cancelledRequests.count == 1)
        #expect(h.recorder.events.last?.hasSuffix("failed cancelled(concurrency)") == true)
    }

    @Test func anAlreadyCancelledSwiftTaskNeverSendsTheRequest() async {
        let h = Harness()
        let manager = h.manager
        let waiter = Task { () -> String in
            while !Task.isCancelled { await Task.yield() }
            do throws(APIError) {
                _ = try await manager.response(for: TestRequest("/ok"))
                return "finished"
            } catch {
                return describe(error)
            }
        }
        waiter.cancel()
        #expect(await waiter.value == "cancelled(concurrency)")
        #expect(h.transport.records.isEmpty)
        #expect(h.recorder.events.count == 1, "one terminal event, no start: \(h.recorder.events)")
    }
}

@Suite("A request no stub matches", .timeLimit(.minutes(1)))
struct UnmatchedStubTests {
    @Test func itFailsWithAnErrorNamingItsMethodURLAndTheStubsAndIsNotRetried() async {
        let h = Harness()
        h.transport.stub(.post, "/items", .status(201))
        let request = TestRequest("/itme", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 0.1, jitter: .none))
        do {
            _ = try await h.manager.response(for: request)
            Issue.record("an unmatched request succeeded")
        } catch {
            guard case .transport(let underlying) = error,
                let unmatched = underlying as? MockTransport.UnmatchedRequest
            else {
                Issue.record("expected MockTransport.UnmatchedRequest, got \(error)")
                return
            }
            #expect(unmatched.method == "GET")
            #expect(unmatched.url?.path == "/itme")
            #expect(unmatched.stubs.contains("POST /items") && unmatched.stubs.contains("any /ok"))
            #expect(unmatched.description.hasPrefix("no stub matches GET https://api.test/itme; the stubs: "))
            #expect("\(error)".contains("no stub matches GET https://api.test/itme"))
        }
        #expect(h.transport.records.count == 1, "not retried: a test's script is not a flaky server")
        #expect(h.transport.records.first?.outcome == .completed)
    }

    @Test func anUnmatchedReplyThatIsSetStillAnswersInstead() {
        let h = Harness()
        h.transport.unmatchedReply = .status(418)
        #expect(h.manager.send(TestRequest("/nowhere")).state.name == "status(418)")
    }

    @Test func aTransportWithoutStubsSaysThereIsNone() async {
        let manager = TestManager(
            engine: APIEngine(transport: MockTransport(), delivery: .inline, execution: .inline))
        do {
            _ = try await manager.response(for: TestRequest("/x", method: .delete))
        } catch {
            #expect("\(error)".contains("no stub matches DELETE https://api.test/x; there is none"))
        }
    }
}

@Suite("A task's state compares with ==", .timeLimit(.minutes(1)))
struct TaskStateEqualityTests {
    @Test func statesCompareByCaseAndFailuresByWhatTheirErrorsSay() {
        let h = Harness()
        h.transport.stub(nil, "/missing", .status(404))
        h.transport.stub(nil, "/held", MockTransport.Reply.status(200).held())
        #expect(h.manager.send(TestRequest("/ok")).state == .finished)
        let held = h.send(TestRequest("/held", .waitUntilDone, scope: "s"))
        let waiting = h.send(TestRequest("/held", .waitUntilDone, scope: "s"))
        #expect(held.state == .running && waiting.state == .waiting)
        #expect(held.state != waiting.state)
        waiting.cancel()
        #expect(waiting.state == .failed(.cancelled(reason: .explicit)))
        #expect(waiting.state != .failed(.cancelled(reason: .policy)))
        let missing = h.manager.send(TestRequest("/missing"))
        #expect(
            missing.state == .failed(.unacceptableStatus(APIRawResponse(statusCode: 404, headers: [:], body: Data()))))
        #expect(
            missing.state != .failed(.unacceptableStatus(APIRawResponse(statusCode: 500, headers: [:], body: Data()))))
        #expect(h.manager.send(TestRequest("/ok", .ignoreCurrent, scope: "s")).state == .failed(.ignored))
        h.transport.releaseAll()
    }
}
