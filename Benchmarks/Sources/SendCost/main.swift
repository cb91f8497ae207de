// What one task costs the scheduler, sent inline through a transport that answers inside `send`,
// in five set-ups: as before interceptors existed (no default headers), with the standard default
// headers, with one adapter that returns its input, with one interceptor that adapts and inspects
// without changing anything, and with an authentication; and `line`: `waitUntilDone` tasks queued
// behind each other on a transport that holds them, then answered one by one (no default headers). Count the
// instructions of two runs with valgrind and take the slope (see Benchmarks/README.md):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/SendCost plain 1000
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/SendCost plain 3000
//
// Without valgrind it prints the wall-clock time per task (noisy on a shared machine).
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct PingRequest: APIRequest {
    let url = URL(string: "http://127.0.0.1/ping") ?? URL(fileURLWithPath: "/")
}

final class PingAPI: APIManager {
    typealias Request = PingRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

struct NoopCancellable: APICancellable { func cancel() {} }

struct InstantTransport: APITransport {
    let response = APIRawResponse(statusCode: 200)
    func send(_ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void)
        -> any APICancellable
    {
        completion(.success(response))
        return NoopCancellable()
    }
}

/// Returns its input: the cost of the interceptor machinery itself.
struct PassThrough: APIRequestAdapter {
    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest { request }
}

/// Adapts and inspects without changing anything.
struct PassThroughBoth: APIRequestAdapter, APIResponseInspector {
    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest { request }
    func inspect(_ response: APIRawResponse, to request: URLRequest, for attempt: APIAttempt) async throws
        -> APIResponseDisposition
    { .proceed }
}

/// Never refreshes in this benchmark: every request is accepted.
struct StaticTokens: APIAuthenticator {
    func refresh(_ credential: APICredential) async throws -> APICredential { credential }
}

/// Holds every request until `completeNext()` answers the oldest (one thread only).
final class HoldingTransport: APITransport, @unchecked Sendable {
    // @unchecked: used from the program's single thread.
    private var pending: [@Sendable (Result<APIRawResponse, any Error>) -> Void] = []
    private var next = 0
    func send(_ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void)
        -> any APICancellable
    {
        pending.append(completion)
        return NoopCancellable()
    }
    func completeNext() -> Bool {
        guard next < pending.count else { return false }
        next += 1
        pending[next - 1](.success(APIRawResponse(statusCode: 200)))
        return true
    }
}

struct LineRequest: APIRequest {
    let url = URL(string: "http://127.0.0.1/ping") ?? URL(fileURLWithPath: "/")
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
}

final class LineAPI: APIManager {
    typealias Request = LineRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

final class Counter: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `.immediate` delivery on one thread.
    var finished = 0
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        finished += 1
    }
}

let variants = ["plain", "headers", "interceptor", "both", "authenticated", "line"]
let arguments = CommandLine.arguments.dropFirst()
guard let variant = arguments.first, variants.contains(variant),
    let count = arguments.dropFirst().first.flatMap(Int.init), count > 0
else {
    FileHandle.standardError.write(Data("usage: SendCost \(variants.joined(separator: "|")) COUNT\n".utf8))
    exit(64)
}

if variant == "line" {
    let holding = HoldingTransport()
    let lineAPI = LineAPI(
        engine: APIEngine(transport: holding, delivery: .immediate, execution: .inline, defaultHeaders: .none))
    let counter = Counter()
    lineAPI.delegate = counter
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<count { lineAPI.send(LineRequest()) }
    while holding.completeNext() {}
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
    precondition(counter.finished == count, "\(counter.finished) of \(count) finished")
    print(String(format: "line: %d tasks, %.2f µs per task (wall clock)", count, elapsed / Double(count) / 1_000))
    exit(0)
}

let authentication = APIAuthentication(authenticator: StaticTokens())
authentication.signIn(with: APICredential(accessToken: "t0ken"))
let engine = APIEngine(
    transport: InstantTransport(), delivery: .immediate, execution: .inline,
    interceptors: variant == "interceptor" ? [PassThrough()] : variant == "both" ? [PassThroughBoth()] : [],
    authentication: variant == "authenticated" ? authentication : nil,
    defaultHeaders: variant == "plain" ? .none : .standard)
let api = PingAPI(engine: engine)
let counter = Counter()
api.delegate = counter
let request = PingRequest()
let start = DispatchTime.now().uptimeNanoseconds
for _ in 0..<count { api.send(request) }
let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
precondition(counter.finished == count, "\(counter.finished) of \(count) finished")
print(String(format: "%@: %d tasks, %.2f µs per task (wall clock)", variant, count, elapsed / Double(count) / 1_000))
