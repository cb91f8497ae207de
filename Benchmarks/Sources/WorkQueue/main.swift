// Where the work runs: what `send(_:)` costs the sender with a disk cache and a 1 MiB JSON body to
// encode, and how long 8 responses that each take 10 ms of CPU to build take in all, with the
// engine's work queue (`.concurrent()`) and with `.inline`. Run with:
//   swift run -c release --package-path Benchmarks WorkQueue
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct InstantTransport: APITransport {
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        completion(.success(APIRawResponse(statusCode: 200, body: Data("{}".utf8))))
        return Nothing()
    }
    struct Nothing: APICancellable { func cancel() {} }
}

/// 1 MiB of JSON to encode when the request is built.
let bigValue = APIValue.object([
    "items": .array((0..<16_384).map { .string(String(repeating: "x", count: 58) + "\($0 % 10)") })
])

struct Upload: APIRequest {
    let url = URL(fileURLWithPath: "/upload")
    var method: HTTPMethod { .post }
    var parameters: APIParameters { .json(bigValue) }
    var cacheOption: APIResponseCache.Option { .both }
}

struct Heavy: APIRequest {
    let url = URL(fileURLWithPath: "/heavy")
}

/// Counts the ends of tasks and tells when `expected` have ended.
final class Ends: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    let lock = NSLock()
    var count = 0
    let group = DispatchGroup()
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) { end() }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) { end() }
    private func end() { group.leave() }
}

final class UploadAPI: APIManager {
    typealias Request = Upload
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// A response whose build burns `milliseconds` of CPU.
final class HeavyAPI: APIManager {
    typealias Request = Heavy
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
    func response(for task: APITask<Heavy>, from raw: APIRawResponse) throws -> APIRawResponse {
        let end = DispatchTime.now().uptimeNanoseconds + 10_000_000
        var spin = 0
        while DispatchTime.now().uptimeNanoseconds < end { spin &+= 1 }
        return raw
    }
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("WorkQueue-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }

print("send(_:) on the sender's thread, 1 MiB JSON body, memory + disk cache (median of 101 sends)")
for (label, execution) in [("work queue", APIEngine.Execution.concurrent()), ("inline", .inline)] {
    let ends = Ends()
    let api = UploadAPI(
        engine: APIEngine(
            transport: InstantTransport(), delivery: .inline, execution: execution,
            cache: APIResponseCache(disk: .init(directory: directory))))
    api.delegate = ends
    var samples: [Double] = []
    for _ in 0..<101 {
        ends.group.enter()
        let start = DispatchTime.now().uptimeNanoseconds
        api.send(Upload())
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000)
        ends.group.wait()
    }
    print(String(format: "  %@: %.1f µs", label, median(samples)))
    // Back to back: 50 sends without waiting, per send.
    for _ in 0..<50 { ends.group.enter() }
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<50 { api.send(Upload()) }
    let each = Double(DispatchTime.now().uptimeNanoseconds - start) / 50_000
    ends.group.wait()
    print(String(format: "  %@, 50 back to back: %.1f µs each", label, each))
}

let cores = ProcessInfo.processInfo.activeProcessorCount
print("8 responses whose build takes 10 ms of CPU each, \(cores) cores (median of 9 runs)")
for (label, execution) in [("work queue", APIEngine.Execution.concurrent()), ("inline", .inline)] {
    let ends = Ends()
    let api = HeavyAPI(engine: APIEngine(transport: InstantTransport(), delivery: .inline, execution: execution))
    api.delegate = ends
    var samples: [Double] = []
    for _ in 0..<9 {
        for _ in 0..<8 { ends.group.enter() }
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<8 { api.send(Heavy()) }
        ends.group.wait()
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000)
    }
    print(String(format: "  %@: %.1f ms (ideal %.0f ms)", label, median(samples), 80.0 / Double(cores)))
}
