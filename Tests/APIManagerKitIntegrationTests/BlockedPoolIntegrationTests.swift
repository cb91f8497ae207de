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

    /// Blocks `count` threads of the global pool while `body` runs, and returns how long the
    /// engine took to end one task (sent from a thread of its own, awaited with a semaphore:
    /// nothing here needs the blocked pool).
    private func secondsToAnswer(blocking count: Int, interceptors: [any APIInterceptor] = []) -> TimeInterval {
        let gate = DispatchSemaphore(value: 0)
        let blocked = DispatchGroup()
        for _ in 0..<count {
            blocked.enter()
            DispatchQueue.global().async {
                blocked.leave()
                gate.wait()
            }
        }
        defer { for _ in 0..<count { gate.signal() } }
        _ = blocked.wait(timeout: .now() + 1)  // every thread the pool gives now is taken
        let ends = Ends()
        let client = Client<APIRawResponse>(
            APIEngine(transport: InstantTransport(), delivery: .immediate, interceptors: interceptors))
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
