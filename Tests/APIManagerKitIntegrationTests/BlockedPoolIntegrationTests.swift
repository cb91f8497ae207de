import APIManagerKit
import Dispatch
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app that blocks threads of the global Dispatch pool (semaphores, synchronous I/O) must not
/// stall the engine: with the default execution its work runs on serial lanes of its own. Real
/// threads and real time, so it lives here; no server is needed.
@Suite("Integration: the engine while the app blocks the global Dispatch pool", .serialized, .timeLimit(.minutes(2)))
struct BlockedPoolIntegrationTests {
    /// Answers at once, on the calling thread: only the engine's own hops are measured.
    struct InstantTransport: APITransport {
        func send(
            _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            completion(.success(APIRawResponse(statusCode: 200, body: Data("{}".utf8), url: request.url)))
            return Nothing()
        }
        struct Nothing: APICancellable { func cancel() {} }
    }

    /// Signals when a task ends.
    final class Ends: APIManagerDelegate, @unchecked Sendable {
        // @unchecked: immutable; the semaphore is thread-safe.
        let ended = DispatchSemaphore(value: 0)
        func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
            ended.signal()
        }
        func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) { ended.signal() }
    }

    /// Blocks the global pool with `count` waiting jobs, queued before the task is sent (the pool
    /// runs its queue in order, so the engine's work, had it gone there, would wait behind them),
    /// and returns how long the engine took to end one task (sent from this thread, awaited with a
    /// semaphore: nothing here needs the blocked pool). The jobs are let go as soon as the task
    /// ends, so the suites running beside this one are held up for as little as possible.
    private func secondsToAnswer(blocking count: Int, interceptors: [any APIInterceptor] = []) -> TimeInterval {
        let gate = DispatchSemaphore(value: 0)
        for _ in 0..<count { DispatchQueue.global().async { gate.wait() } }
        defer { for _ in 0..<count { gate.signal() } }
        let ends = Ends()
        let client = Client<APIRawResponse>(
            APIEngine(transport: InstantTransport(), delivery: .inline, interceptors: interceptors))
        client.delegate = ends
        let started = DispatchTime.now()
        client.send(HTTPRequest("instant"))
        guard ends.ended.wait(timeout: .now() + 60) == .success else { return .infinity }
        return Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
    }

    @Test func theDefaultExecutionAnswersWhileTheAppBlocksTheGlobalPool() {
        let seconds = secondsToAnswer(blocking: 16)
        #expect(seconds < 1, "the engine answered after \(seconds) s")
    }

    @Test func interceptorsRunWhileTheAppBlocksTheGlobalPool() {
        struct Stamp: APIRequestAdapter {
            func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
                var stamped = request
                stamped.setValue("1", forHTTPHeaderField: "X-Stamp")
                return stamped
            }
        }
        let seconds = secondsToAnswer(blocking: 16, interceptors: [Stamp()])
        #expect(seconds < 1, "the engine answered after \(seconds) s")
    }
}
