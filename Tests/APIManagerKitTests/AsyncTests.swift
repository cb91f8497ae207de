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
