import APIManagerKit
import Benchmark
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Each benchmark sends a fixed number of tasks per iteration; divide by that number for the cost per
// task (the README's table does). Compare rows of one run with each other: the machines are shared.

struct PingRequest: APIRequest {
    static let base = URL(string: "http://127.0.0.1/ping")
    let url = PingRequest.base ?? URL(fileURLWithPath: "/")
    var concurrencyPolicy: APIConcurrencyPolicy = .default
}

final class PingAPI: APIManager {
    typealias Request = PingRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(transport: any APITransport) {
        engine = APIEngine(transport: transport, delivery: .inline, execution: .inline)
    }
}

/// Counts terminal events, so delivery is part of what is measured.
final class CountingDelegate: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: events arrive one at a time (`.inline` delivery serialises them).
    var finished = 0
    var failed = 0
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        finished += 1
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) { failed += 1 }
}

struct NoopCancellable: APICancellable { func cancel() {} }

/// Completes every request inside `send`.
struct InstantTransport: APITransport {
    let response = APIRawResponse(statusCode: 200)
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    )
        -> any APICancellable
    {
        completion(.success(response))
        return NoopCancellable()
    }
}

/// Keeps every request pending until `completeNext()`.
final class HoldingTransport: APITransport, @unchecked Sendable {
    // @unchecked: used from the benchmark's single thread only.
    private var pending: [@Sendable (Result<APIRawResponse, any Error>) -> Void] = []
    private var next = 0
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    )
        -> any APICancellable
    {
        pending.append(completion)
        return NoopCancellable()
    }
    func completeNext() -> Bool {
        guard next < pending.count else { return false }
        let completion = pending[next]
        next += 1
        completion(.success(APIRawResponse(statusCode: 200)))
        return true
    }
}

func sendDefault(_ count: Int, benchmark: Benchmark) {
    let api = PingAPI(transport: InstantTransport())
    let delegate = CountingDelegate()
    api.delegate = delegate
    let request = PingRequest()
    benchmark.startMeasurement()
    for _ in 0..<count { api.send(request) }
    benchmark.stopMeasurement()
    precondition(delegate.finished == count)
}

func sendWaitUntilDone(_ count: Int, benchmark: Benchmark) {
    let transport = HoldingTransport()
    let api = PingAPI(transport: transport)
    let delegate = CountingDelegate()
    api.delegate = delegate
    let request = PingRequest(concurrencyPolicy: .waitUntilDone)
    benchmark.startMeasurement()
    for _ in 0..<count { api.send(request) }
    while transport.completeNext() {}
    benchmark.stopMeasurement()
    precondition(delegate.finished == count)
}

func sweepCancelOthers(_ inFlight: Int, benchmark: Benchmark) {
    let api = PingAPI(transport: HoldingTransport())
    let delegate = CountingDelegate()
    api.delegate = delegate
    benchmark.startMeasurement()
    for _ in 0..<inFlight { api.send(PingRequest()) }
    api.send(PingRequest(concurrencyPolicy: .cancelOthers))
    benchmark.stopMeasurement()
    precondition(delegate.failed == inFlight)
    api.cancelAll()
}

func queueWaiting(_ count: Int, benchmark: Benchmark) {
    let api = PingAPI(transport: HoldingTransport())
    let request = PingRequest(concurrencyPolicy: .waitUntilDone)
    api.send(request)  // the one running task; every later one waits
    benchmark.startMeasurement()
    for _ in 0..<count { api.send(request) }
    benchmark.stopMeasurement()
    precondition(api.engine.inFlightCount == count + 1)
    api.cancelAll()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.cpuTotal, .wallClock, .mallocCountTotal, .mallocBytesCount, .peakMemoryResident],
        warmupIterations: 1,
        maxDuration: .seconds(20),
        maxIterations: 5
    )

    for count in [1_000, 100_000] {
        Benchmark("default: \(count) tasks, instant transport") { sendDefault(count, benchmark: $0) }
        Benchmark("waitUntilDone: \(count) tasks") { sendWaitUntilDone(count, benchmark: $0) }
    }
    for inFlight in [10, 1_000, 100_000] {
        Benchmark("cancelOthers: sweep \(inFlight) in-flight tasks") { sweepCancelOthers(inFlight, benchmark: $0) }
    }
    for count in [1_000, 100_000] {
        Benchmark("waiting: \(count) queued tasks") { queueWaiting(count, benchmark: $0) }
    }
    registerCacheBenchmarks()
}
