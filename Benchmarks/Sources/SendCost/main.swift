// What one task costs the scheduler, sent inline through a transport that answers inside `send`,
// in five set-ups: as before interceptors existed (no default headers), with the standard default
// headers, with one adapter that returns its input, with one interceptor that adapts and inspects
// without changing anything, and with an authentication; and, on a transport that holds requests
// until they are answered one by one (no default headers): `line` (`waitUntilDone` tasks queued
// behind each other), `priorities` (the same over eight priorities), `limited` (four at a time),
// `conflate` (each replacing the one waiting), `sharing` (every sender joining one attempt); on a
// clock the program steps, 0.1 s between sends: `debounce` (0.3 s), `throttle` (one start per second,
// the others waiting for their turn) and `throttle-ignore` (the others ignored); and
// `group` (four managers on four engines, from four threads, sharing a group of four, instant) and
// `group-line` (one manager, a group of four held slots, the others in the group's line). Count the
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
struct StaticTokens: APIAuthentication.Authenticator {
    func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential { credential }
}

/// Holds every request until `completeNext()` answers the oldest (one thread only).
final class HoldingTransport: APITransport, @unchecked Sendable {
    // @unchecked: used from the program's single thread.
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
        next += 1
        pending[next - 1](.success(APIRawResponse(statusCode: 200)))
        return true
    }
}

struct LineRequest: APIRequest {
    let url = URL(string: "http://127.0.0.1/ping") ?? URL(fileURLWithPath: "/")
    var concurrencyPolicy: APIConcurrencyPolicy = .waitUntilDone
    var priority = 0
    var sharing: APIConcurrencyPolicy.Sharing = .never
    var throttleMode: APIConcurrencyPolicy.ThrottleMode = .wait
    var group: APIConcurrencyPolicy.Group?
    var concurrencyGroup: APIConcurrencyPolicy.Group? { group }
}

/// The `line` mode's request, as small as it was when the mode was added, so its figures compare.
struct QueuedRequest: APIRequest {
    let url = URL(string: "http://127.0.0.1/ping") ?? URL(fileURLWithPath: "/")
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
}

final class QueueAPI: APIManager {
    typealias Request = QueuedRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

final class LineAPI: APIManager {
    typealias Request = LineRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

final class Counter: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `.inline` delivery on one thread.
    var finished = 0
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        finished += 1
    }
}

let variants = [
    "plain", "headers", "interceptor", "both", "authenticated", "line", "priorities", "limited", "conflate", "sharing",
    "debounce", "throttle", "throttle-ignore", "group", "group-line",
    "waiting-memory",
]
let arguments = CommandLine.arguments.dropFirst()
guard let variant = arguments.first, variants.contains(variant),
    let count = arguments.dropFirst().first.flatMap(Int.init), count > 0
else {
    FileHandle.standardError.write(Data("usage: SendCost \(variants.joined(separator: "|")) COUNT\n".utf8))
    exit(64)
}

/// Sends `count` tasks on a transport that holds them, then answers them one by one, and prints the
/// wall-clock time per task. `sender` makes the mode's manager (a concrete class, as a user's is) on
/// the engine and returns what sends task number N.
func runHeld(_ name: String, count: Int, sender: (APIEngine) -> (Int) -> Void) {
    let holding = HoldingTransport()
    let send = sender(APIEngine(transport: holding, delivery: .inline, execution: .inline, defaultHeaders: .none))
    let start = DispatchTime.now().uptimeNanoseconds
    for index in 0..<count { send(index) }
    while holding.completeNext() {}
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
    print(String(format: "%@: %d tasks, %.2f µs per task (wall clock)", name, count, elapsed / Double(count) / 1_000))
}

/// A clock the program moves by hand (one thread only): timers fire in due order when it advances.
final class SteppedClock: APIClock, @unchecked Sendable {
    // @unchecked: used from the program's single thread.
    private final class Timer: APICancellable, @unchecked Sendable {
        let due: TimeInterval
        let order: Int
        var action: (@Sendable () -> Void)?
        init(due: TimeInterval, order: Int, action: @escaping @Sendable () -> Void) {
            self.due = due
            self.order = order
            self.action = action
        }
        func cancel() { action = nil }
        func precedes(_ other: Timer) -> Bool { (due, order) < (other.due, other.order) }
    }
    private(set) var now: TimeInterval = 0
    var date: Date { Date(timeIntervalSince1970: now) }
    private var heap: [Timer] = []
    private var scheduled = 0

    func schedule(after delay: TimeInterval, _ action: @escaping @Sendable () -> Void) -> any APICancellable {
        scheduled += 1
        let timer = Timer(due: now + max(0, delay), order: scheduled, action: action)
        heap.append(timer)
        var child = heap.count - 1
        while child > 0, heap[child].precedes(heap[(child - 1) / 2]) {
            heap.swapAt(child, (child - 1) / 2)
            child = (child - 1) / 2
        }
        return timer
    }

    /// Advances to `time`, firing every timer due by then.
    func advance(to time: TimeInterval) {
        while let first = heap.first, first.due <= time {
            let last = heap.removeLast()
            if !heap.isEmpty {
                heap[0] = last
                var parent = 0
                while true {
                    let left = 2 * parent + 1
                    let right = left + 1
                    var smallest = parent
                    if left < heap.count, heap[left].precedes(heap[smallest]) { smallest = left }
                    if right < heap.count, heap[right].precedes(heap[smallest]) { smallest = right }
                    if smallest == parent { break }
                    heap.swapAt(parent, smallest)
                    parent = smallest
                }
            }
            now = max(now, first.due)
            first.action?()
        }
        now = max(now, time)
    }
}

/// Sends `count` paced tasks on a stepped clock and a transport that holds them; moves the clock
/// by `step` after each send, then until every timer has fired, answering what was sent.
func runPaced(_ name: String, count: Int, step: TimeInterval, request: LineRequest) {
    let clock = SteppedClock()
    let holding = HoldingTransport()
    let api = LineAPI(
        engine: APIEngine(
            transport: holding, clock: clock, delivery: .inline, execution: .inline, defaultHeaders: .none))
    api.delegate = heldCounter
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<count {
        api.send(request)
        clock.advance(to: clock.now + step)
        while holding.completeNext() {}
    }
    clock.advance(to: .greatestFiniteMagnitude)
    while holding.completeNext() {}
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
    print(String(format: "%@: %d tasks, %.2f µs per task (wall clock)", name, count, elapsed / Double(count) / 1_000))
}

/// Counts the held modes' terminal events (the managers hold their delegate weakly).
let heldCounter = Counter()

/// A held mode on a `LineAPI`, each task made by `request`.
func runHeldLine(_ name: String, count: Int, request: @escaping (Int) -> LineRequest) {
    runHeld(name, count: count) { engine in
        let api = LineAPI(engine: engine)
        api.delegate = heldCounter
        return { api.send(request($0)) }
    }
}

switch variant {
case "line":
    // waitUntilDone tasks queued behind each other, then answered one by one.
    // Written out as when the mode was added, so its instruction counts compare across builds
    // (through `runHeld` the same tasks count about 3k instructions more each).
    let holding = HoldingTransport()
    let queueAPI = QueueAPI(
        engine: APIEngine(transport: holding, delivery: .inline, execution: .inline, defaultHeaders: .none))
    queueAPI.delegate = heldCounter
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<count { queueAPI.send(QueuedRequest()) }
    while holding.completeNext() {}
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
    print(String(format: "line: %d tasks, %.2f µs per task (wall clock)", count, elapsed / Double(count) / 1_000))
    exit(0)
case "priorities":
    // The same, the line kept by eight priorities.
    runHeldLine("priorities", count: count) { LineRequest(priority: $0 % 8) }
    exit(0)
case "limited":
    // limited tasks, four at a time, the rest in line.
    runHeldLine("limited", count: count) { _ in LineRequest(concurrencyPolicy: .limited) }
    exit(0)
case "conflate":
    // Each conflate task replaces the one waiting; one runs.
    runHeldLine("conflate", count: count) { _ in LineRequest(concurrencyPolicy: .conflate) }
    exit(0)
case "sharing":
    // One request on the wire for every sender: all join the first sender's attempt.
    runHeldLine("sharing", count: count) { _ in LineRequest(concurrencyPolicy: .default, sharing: .safeMethods) }
    exit(0)
case "debounce":
    // Keystrokes 0.1 s apart, debounced for 0.3 s: each replaces the one in its quiet wait.
    runPaced("debounce", count: count, step: 0.1, request: LineRequest(concurrencyPolicy: .debounce))
    exit(0)
case "throttle":
    // Sent 0.1 s apart, one start per second: each waits for its turn (a timer each).
    runPaced("throttle", count: count, step: 0.1, request: LineRequest(concurrencyPolicy: .throttle))
    exit(0)
case "throttle-ignore":
    // The same, but those sent before their turn end as ignored.
    runPaced(
        "throttle-ignore", count: count, step: 0.1,
        request: LineRequest(concurrencyPolicy: .throttle, throttleMode: .ignore))
    exit(0)
case "group-line":
    // One manager, a group of four held slots, the rest waiting in the group's line by eight priorities.
    let group = APIConcurrencyPolicy.Group(limit: 4)
    runHeldLine("group-line", count: count) { LineRequest(concurrencyPolicy: .default, priority: $0 % 8, group: group) }
    exit(0)
case "group":
    // Four managers on four engines, from four threads, sharing a group of four slots.
    let group = APIConcurrencyPolicy.Group(limit: 4)
    let managers = (0..<4).map { _ in
        LineAPI(
            engine: APIEngine(
                transport: InstantTransport(), delivery: .inline, execution: .inline, defaultHeaders: .none))
    }
    let start = DispatchTime.now().uptimeNanoseconds
    DispatchQueue.concurrentPerform(iterations: 4) { thread in
        for _ in 0..<(count / 4) { managers[thread].send(LineRequest(concurrencyPolicy: .default, group: group)) }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
    print(
        String(
            format: "group: %d tasks, %.2f µs per task (wall clock, 4 threads)", count, elapsed / Double(count) / 1_000)
    )
    exit(0)
case "waiting-memory":
    // Resident bytes per waiting task: one held task, then `count` waiting behind it over eight
    // priorities (Linux: /proc/self/statm; use 100,000 tasks or more, pages are coarse).
    func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * 4096 : 0
    }
    let holding = HoldingTransport()
    let lineAPI = LineAPI(
        engine: APIEngine(transport: holding, delivery: .inline, execution: .inline, defaultHeaders: .none))
    lineAPI.send(LineRequest())
    let before = residentBytes()
    for index in 0..<count { lineAPI.send(LineRequest(priority: index % 8)) }
    let after = residentBytes()
    print(
        String(
            format: "waiting-memory: %d waiting tasks over 8 priorities, %.0f resident bytes each", count,
            Double(after - before) / Double(count)))
    exit(0)
default:
    break
}

let authentication = APIAuthentication(authenticator: StaticTokens())
authentication.signIn(with: APIAuthentication.Credential(accessToken: "t0ken"))
let engine = APIEngine(
    transport: InstantTransport(), delivery: .inline, execution: .inline,
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
