// What a durable line costs (APIConcurrencyPolicy.durable, APIEngine.DurableStore):
//
//   DurableCost send N              N tasks in one scope through a transport that answers inside
//                                    `send`, first as `waitUntilDone`, then as `durable` (each written,
//                                    fsync'd, and removed): wall-clock time per task of each, and the
//                                    difference. Under valgrind, `send-plain N` and `send-durable N`
//                                    count one of them (take the slope of two N, Benchmarks/README.md).
//   DurableCost write DIR N BYTES    leaves N pending durable tasks in DIR, each request carrying BYTES
//                                    of payload (a transport that never answers; the engine released)
//   DurableCost replay DIR           a new engine replays DIR's line (the transport holds every request):
//                                    the time it took, how many tasks, and the process's peak memory
//   DurableCost drain DIR            the same, the transport answering inside `send`, the engine on its
//                                    default work queues, the replay's outcomes dropped: the whole line is
//                                    sent and removed; the time until the last ended, and the peak memory
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Edit: APIRequest, Codable {
    var number: Int
    var payload: String
    var policy: String

    var url: URL { URL(string: "http://127.0.0.1/cart") ?? URL(fileURLWithPath: "/") }
    var method: HTTPMethod { .post }
    var parameters: APIParameters { .none }
    var concurrencyPolicy: APIConcurrencyPolicy { APIConcurrencyPolicy(rawValue: policy) ?? .waitUntilDone }
    var concurrencyScope: String? { "cart" }
    var idempotencyKey: APIIdempotencyKey? { .standard }
}

final class CartAPI: APIManager {
    typealias Request = Edit
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

struct NoopCancellable: APICancellable { func cancel() {} }

/// Answers inside `send`, or never (`answers: false`).
struct Transport: APITransport {
    let answers: Bool
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        if answers { completion(.success(APIRawResponse(statusCode: 200))) }
        return NoopCancellable()
    }
}

func makeManager(store: APIEngine.DurableStore?, answers: Bool, inline: Bool = true) -> CartAPI {
    var configuration = APIEngine.Configuration()
    configuration.transport = Transport(answers: answers)
    if inline {
        configuration.delivery = .inline
        configuration.execution = .inline
    } else {
        // The main queue is not run here (the main thread waits): events go to a queue of their own.
        configuration.delivery = .queue(DispatchQueue(label: "DurableCost.delivery"))
    }
    configuration.defaultHeaders = .none
    configuration.durableStore = store
    return CartAPI(engine: APIEngine(configuration: configuration))
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

func temporaryFolder() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("DurableCost-\(getpid())-\(UUID().uuidString)")
}

/// Sends `count` tasks under `policy` and returns the seconds they took.
func send(_ count: Int, policy: APIConcurrencyPolicy, store: APIEngine.DurableStore?) -> Double {
    let manager = makeManager(store: store, answers: true)
    let start = now()
    for number in 0..<count {
        manager.send(Edit(number: number, payload: "", policy: policy.rawValue))
    }
    return now() - start
}

func peakMemoryKiB() -> Int {
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    return Int(usage.ru_maxrss) / 1024
    #else
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss)
    #endif
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let mode = arguments.first ?? "send"
switch mode {
case "send":
    let count = arguments.count > 1 ? Int(arguments[1]) ?? 1_000 : 1_000
    let folder = temporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    _ = send(100, policy: .waitUntilDone, store: nil)  // warm-up
    let plain = send(count, policy: .waitUntilDone, store: nil)
    let durable = send(count, policy: .durable, store: APIEngine.DurableStore(directory: folder))
    print(
        String(
            format: "%d tasks: waitUntilDone %.1f µs/task, durable %.1f µs/task, the store %.1f µs/task",
            count, plain / Double(count) * 1e6, durable / Double(count) * 1e6,
            (durable - plain) / Double(count) * 1e6))
case "send-plain", "send-durable":
    let count = arguments.count > 1 ? Int(arguments[1]) ?? 1_000 : 1_000
    let folder = temporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let durable = mode == "send-durable"
    _ = send(
        count, policy: durable ? .durable : .waitUntilDone,
        store: durable ? APIEngine.DurableStore(directory: folder) : nil)
case "write":
    guard arguments.count == 4, let count = Int(arguments[2]), let bytes = Int(arguments[3]) else {
        fail("usage: DurableCost write DIR N BYTES")
    }
    let payload = String(repeating: "x", count: bytes)
    do {
        let manager = makeManager(
            store: APIEngine.DurableStore(directory: URL(fileURLWithPath: arguments[1])), answers: false)
        for number in 0..<count { manager.send(Edit(number: number, payload: payload, policy: "durable")) }
    }
    print("wrote \(count) pending durable tasks of \(bytes) payload bytes")
case "replay", "drain":
    guard arguments.count == 2 else { fail("usage: DurableCost \(mode) DIR") }
    let before = peakMemoryKiB()
    let drains = mode == "drain"
    let manager = makeManager(
        store: APIEngine.DurableStore(directory: URL(fileURLWithPath: arguments[1])), answers: drains,
        inline: !drains)
    let start = now()
    let count: Int
    let setAside: Int
    do {
        let replay = try manager.replayDurableTasks(inScope: "cart")
        (count, setAside) = (replay.count, replay.setAside.count)
    } catch {
        fail("replay failed: \(error)")
    }
    let replayed = now() - start
    let afterReplay = peakMemoryKiB()
    while drains, manager.engine.inFlightCount > 0 { usleep(1_000) }
    let drained = now() - start
    print(
        String(
            format:
                "replayed %d tasks (%d set aside) in %.3f s%@; peak memory %d KiB (%d KiB before, %d KiB after the replay)",
            count, setAside, replayed, drains ? String(format: ", all sent and ended in %.3f s", drained) : "",
            peakMemoryKiB(), before, afterReplay))
    manager.cancelAll()
default:
    fail("unknown mode \(mode)")
}
