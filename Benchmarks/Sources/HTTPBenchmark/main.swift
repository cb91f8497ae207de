// Requests per second, CPU per request and memory of APIManagerKit (manager + URLSessionTransport)
// side by side with raw URLSession, against a keep-alive server on loopback. Scripts/benchmark-http.sh
// starts nginx and runs this; see Benchmarks/README.md.
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Options {
    var baseURL: URL?
    var requests = 4000
    var rounds = 5
    var memoryOnly = false
    /// What is compared with raw URLSession: `manager`, `transport` (URLSessionTransport alone),
    /// `delegated` (raw URLSession on a session with an empty delegate), or a calibration client:
    /// `busyN` and `postN`, the transport with an N µs busy loop before each send or in each
    /// completion handler.
    var candidates = ["manager"]
    var memoryClient = "manager"
    /// Runs only this client, `requests` times, `inFlight` at a time (for profilers such as
    /// `valgrind --tool=callgrind` or `perf stat`).
    var only: String?
    var inFlight = 8
    /// The body `--only` fetches: `small` (205 B, the default) or `large` (64 KiB).
    var body = "small"
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        switch argument {
        case "--url": options.baseURL = arguments.popFirst().flatMap(URL.init(string:))
        case "--requests": options.requests = arguments.popFirst().flatMap(Int.init) ?? options.requests
        case "--rounds": options.rounds = arguments.popFirst().flatMap(Int.init) ?? options.rounds
        case "--memory":
            options.memoryOnly = true
            options.memoryClient = arguments.popFirst() ?? "manager"
        case "--only":
            options.only = arguments.popFirst()
        case "--body":
            options.body = arguments.popFirst() ?? options.body
        case "--in-flight":
            options.inFlight = arguments.popFirst().flatMap(Int.init) ?? options.inFlight
        case "--candidates":
            options.candidates = (arguments.popFirst() ?? "manager").split(separator: ",").map(String.init)
        default:
            FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
            exit(64)
        }
    }
    return options
}

// MARK: Measuring

struct Sample {
    var seconds: Double
    var cpuSeconds: Double
}

func cpuTime() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return user + system
}

/// Resident memory now, and its peak so far, in KiB (from /proc/self/status).
func memory() -> (resident: Int, peak: Int) {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// Runs `count` requests with at most `inFlight` outstanding; `send` calls its argument when one ends.
/// Numbers the runs (main thread only), so a client can tell a new run.
nonisolated(unsafe) var currentRun = 0

func measure(count: Int, inFlight: Int, send: (@escaping @Sendable (Bool) -> Void) -> Void) -> Sample {
    currentRun += 1
    let slots = DispatchSemaphore(value: inFlight)
    let group = DispatchGroup()
    let failures = Counter()
    let done: @Sendable (Bool) -> Void = { ok in
        if !ok { failures.increment() }
        slots.signal()
        group.leave()
    }
    let start = DispatchTime.now()
    let cpuStart = cpuTime()
    for _ in 0..<count {
        slots.wait()
        group.enter()
        send(done)
    }
    group.wait()
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    if failures.value > 0 {
        FileHandle.standardError.write(Data("\(failures.value) requests failed\n".utf8))
        exit(1)
    }
    return Sample(seconds: seconds, cpuSeconds: cpuTime() - cpuStart)
}

final class Counter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

// MARK: The two clients

final class EmptyDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {}

/// Raw URLSession with completion handlers: the baseline, on the same configuration as the
/// transport's (ephemeral, no URLCache), so both do the same work.
struct RawClient {
    var session = URLSession(configuration: URLSessionTransport.defaultConfiguration)
    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        session.dataTask(with: url) { data, response, error in
            done(error == nil && (response as? HTTPURLResponse)?.statusCode == 200 && data != nil)
        }.resume()
    }
}

struct FileRequest: APIRequest {
    let url: URL
}

/// An APIManager on URLSessionTransport, its results forwarded by the manager's hooks.
final class FileAPI: APIManager {
    typealias Request = FileRequest
    typealias Response = APIRawResponse
    let engine: APIEngine
    private let done: @Sendable (Bool) -> Void

    init(transport: any APITransport, execution: APIEngine.Execution, done: @escaping @Sendable (Bool) -> Void) {
        engine = APIEngine(transport: transport, delivery: .inline, execution: execution)
        self.done = done
    }

    func task(_ task: APITask<FileRequest>, didFinishWith response: APIRawResponse) {
        done(response.statusCode == 200)
    }

    func task(_ task: APITask<FileRequest>, didFailWith error: APIError) {
        done(false)
    }
}

/// Sends through a manager whose hooks call the run's `done`: a manager per run, all on one
/// transport (one session, its connections reused), so no per-request bookkeeping is measured.
final class ManagerClient: @unchecked Sendable {
    // @unchecked: `current` is replaced only between runs, on the sending thread, before the first
    // request of a run is sent.
    let transport = URLSessionTransport()
    /// Whether the manager works inline rather than on its work queue (the default).
    let inline: Bool
    private var current: (api: FileAPI, run: Int)?

    init(inline: Bool) { self.inline = inline }

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void, run: Int) {
        if current?.run != run {
            let execution: APIEngine.Execution = inline ? .inline : .concurrent()
            current = (FileAPI(transport: transport, execution: execution, done: done), run)
        }
        current?.api.send(FileRequest(url: url))
    }
}

// MARK: Main

let options = parseOptions()
guard let baseURL = options.baseURL else {
    FileHandle.standardError.write(
        Data(
            "usage: HTTPBenchmark --url http://127.0.0.1:PORT [--requests N] [--rounds N] [--candidates manager,managerInline,transport,delegated,busyN,postN(,ahc,managerAHC)] [--memory CLIENT] [--only CLIENT [--in-flight N] [--body small|large]]\n"
                .utf8))
    exit(64)
}
let raw = RawClient()
let control = RawClient()
let delegated = RawClient(
    session: URLSession(
        configuration: URLSessionTransport.defaultConfiguration, delegate: EmptyDelegate(), delegateQueue: nil))
let managerClient = ManagerClient(inline: false)
let inlineManagerClient = ManagerClient(inline: true)
let transport = URLSessionTransport()
func sendThroughTransport(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
    _ = transport.send(URLRequest(url: url)) { report($0, to: done) }
}

/// Tells the run whether the transport's answer is a `200`.
@Sendable func report(_ result: Result<APIRawResponse, any Error>, to done: @Sendable (Bool) -> Void) {
    if case .success(let response) = result { done(response.statusCode == 200) } else { done(false) }
}

/// Spins for `nanoseconds` without sleeping, allocating or locking: the calibration clients' stand-in
/// for a layer's own work.
@Sendable @inline(never) func busyLoop(nanoseconds: UInt64) {
    let end = DispatchTime.now().uptimeNanoseconds + nanoseconds
    while DispatchTime.now().uptimeNanoseconds < end {}
}

/// The calibration clients: URLSessionTransport alone with an N µs busy loop before each send
/// (`busyN`) or in each completion handler, before the run is told (`postN`). They show what this
/// method charges for a few microseconds of work added to a request's path.
func calibrationClient(named name: String) -> ((URL, @escaping @Sendable (Bool) -> Void) -> Void)? {
    // At most one second, so the nanoseconds cannot overflow.
    guard let microseconds = UInt64(name.dropFirst(4)), microseconds <= 1_000_000 else { return nil }
    let nanoseconds = microseconds * 1000
    switch name.prefix(4) {
    case "busy":
        return { url, done in
            busyLoop(nanoseconds: nanoseconds)
            sendThroughTransport(url, done: done)
        }
    case "post":
        return { url, done in
            _ = transport.send(URLRequest(url: url)) { result in
                busyLoop(nanoseconds: nanoseconds)
                report(result, to: done)
            }
        }
    default:
        return nil
    }
}

/// The manager client: a new manager for each run, working on its work queue (`manager`) or inline
/// (`managerInline`).
func sendThroughManager(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
    managerClient.send(url, done: done, run: currentRun)
}
func sendThroughInlineManager(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
    inlineManagerClient.send(url, done: done, run: currentRun)
}
let namedClients: [String: (URL, @escaping @Sendable (Bool) -> Void) -> Void] = [
    "manager": sendThroughManager, "managerInline": sendThroughInlineManager, "transport": sendThroughTransport,
    "delegated": delegated.send, "raw": raw.send,
]
let moreClients = extraClients()
@MainActor func client(named name: String) -> ((URL, @escaping @Sendable (Bool) -> Void) -> Void)? {
    namedClients[name] ?? moreClients[name] ?? calibrationClient(named: name)
}
let small = baseURL.appendingPathComponent("small.json")
let large = baseURL.appendingPathComponent("large.bin")

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

if options.memoryOnly {
    // Peak resident memory after 2k and after 20k requests (8 in flight, 205 B).
    guard let client = client(named: options.memoryClient) else {
        FileHandle.standardError.write(Data("unknown client \(options.memoryClient)\n".utf8))
        exit(64)
    }
    _ = measure(count: 2000, inFlight: 8) { client(small, $0) }
    let at2k = memory()
    _ = measure(count: 18_000, inFlight: 8) { client(small, $0) }
    let at20k = memory()
    print("| requests (\(options.memoryClient)) | peak RSS (KiB) | RSS after (KiB) |")
    print("|---:|---:|---:|")
    print("| 2,000 | \(at2k.peak) | \(at2k.resident) |")
    print("| 20,000 | \(at20k.peak) | \(at20k.resident) |")
    print("")
    print(
        String(
            format: "peak growth from 2k to 20k requests: %+d KiB (%+.1f%%)", at20k.peak - at2k.peak,
            Double(at20k.peak - at2k.peak) / Double(max(at2k.peak, 1)) * 100))
    exit(0)
}

if let only = options.only {
    guard let client = client(named: only) else {
        FileHandle.standardError.write(Data("unknown client \(only)\n".utf8))
        exit(64)
    }
    guard ["small", "large"].contains(options.body) else {
        FileHandle.standardError.write(Data("unknown body \(options.body): small or large\n".utf8))
        exit(64)
    }
    let body = options.body == "large" ? large : small
    let sample = measure(count: options.requests, inFlight: options.inFlight) { client(body, $0) }
    print(
        String(
            format: "%@: %.0f req/s, %.1f µs CPU per request", only, Double(options.requests) / sample.seconds,
            sample.cpuSeconds / Double(options.requests) * 1e6))
    exit(0)
}

// Warm every client (connections, caches, lazy initialisation).
for client in [
    raw.send, control.send, sendThroughManager, sendThroughInlineManager, sendThroughTransport, delegated.send,
] + moreClients.values {
    _ = measure(count: 300, inFlight: 8) { client(small, $0) }
}

/// One row: `candidate` against raw URLSession, alternating which runs first in each round.
func compare(
    _ name: String, _ url: URL, inFlight: Int, candidate: (URL, @escaping @Sendable (Bool) -> Void) -> Void
) {
    var rawSamples: [Sample] = []
    var candidateSamples: [Sample] = []
    var rateRatios: [Double] = []
    var cpuRatios: [Double] = []
    for round in 0..<options.rounds {
        let rawFirst = round % 2 == 0
        var rawSample = Sample(seconds: 0, cpuSeconds: 0)
        var candidateSample = rawSample
        for runRaw in rawFirst ? [true, false] : [false, true] {
            if runRaw {
                rawSample = measure(count: options.requests, inFlight: inFlight) { raw.send(url, done: $0) }
            } else {
                candidateSample = measure(count: options.requests, inFlight: inFlight) { candidate(url, $0) }
            }
        }
        rawSamples.append(rawSample)
        candidateSamples.append(candidateSample)
        rateRatios.append(rawSample.seconds / candidateSample.seconds)
        cpuRatios.append(candidateSample.cpuSeconds / rawSample.cpuSeconds)
    }
    let count = Double(options.requests)
    print(
        String(
            format: "| %@ | %d | %.0f | %.0f | %.3fx (%.2f–%.2f) | %.1f | %.1f | %.3fx (%.2f–%.2f) |", name, inFlight,
            count / median(rawSamples.map(\.seconds)), count / median(candidateSamples.map(\.seconds)),
            median(rateRatios), rateRatios.min() ?? 0, rateRatios.max() ?? 0,
            median(rawSamples.map(\.cpuSeconds)) / count * 1e6,
            median(candidateSamples.map(\.cpuSeconds)) / count * 1e6,
            median(cpuRatios), cpuRatios.min() ?? 0, cpuRatios.max() ?? 0))
}

print("\(options.requests) requests per run, \(options.rounds) rounds; in each round raw URLSession and the candidate")
print("run back to back, in alternating order; ratios are medians of the per-round ratios, with their")
print("spread (lowest–highest round) in brackets.")
print("")
for candidate in options.candidates {
    guard let client = client(named: candidate) else {
        FileHandle.standardError.write(Data("unknown candidate \(candidate)\n".utf8))
        exit(64)
    }
    print(
        "| body | in flight | raw URLSession req/s | \(candidate) req/s | req/s ratio | raw CPU µs/req | \(candidate) CPU µs/req | CPU ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (name, url) in [("205 B", small), ("64 KiB", large)] {
        for inFlight in [1, 8] {
            compare(name, url, inFlight: inFlight, candidate: client)
        }
    }
    print("")
}
print("Control (the noise floor): raw URLSession against a second raw URLSession session, same method.")
print("")
print(
    "| body | in flight | raw req/s | second raw req/s | req/s ratio | raw CPU µs/req | second raw CPU µs/req | CPU ratio |"
)
print("|---|---:|---:|---:|---:|---:|---:|---:|")
compare("205 B", small, inFlight: 8, candidate: control.send)
