// Requests per second, CPU per request and memory of APIManagerKit (manager + URLSessionTransport)
// side by side with raw URLSession, against a keep-alive server on loopback. Scripts/benchmark-http.sh
// starts nginx and runs this; see README.md, "Benchmarks".
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
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        switch argument {
        case "--url": options.baseURL = arguments.popFirst().flatMap(URL.init(string:))
        case "--requests": options.requests = arguments.popFirst().flatMap(Int.init) ?? options.requests
        case "--rounds": options.rounds = arguments.popFirst().flatMap(Int.init) ?? options.rounds
        case "--memory": options.memoryOnly = true
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
func measure(count: Int, inFlight: Int, send: (@escaping @Sendable (Bool) -> Void) -> Void) -> Sample {
    let slots = DispatchSemaphore(value: inFlight)
    let group = DispatchGroup()
    let failures = Counter()
    let start = DispatchTime.now()
    let cpuStart = cpuTime()
    for _ in 0..<count {
        slots.wait()
        group.enter()
        send { ok in
            if !ok { failures.increment() }
            slots.signal()
            group.leave()
        }
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

/// Raw URLSession with completion handlers: the baseline.
final class EmptyDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {}
let experiment = ProcessInfo.processInfo.environment["EXPERIMENT"] ?? ""
struct RawClient {
    let session =
        experiment == "rawdelegate"
        ? URLSession(configuration: .ephemeral, delegate: EmptyDelegate(), delegateQueue: nil)
        : URLSession(configuration: .ephemeral)
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
    let engine = APIEngine(transport: URLSessionTransport(), delivery: .immediate)
    let callbacks = Callbacks()

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        callbacks.register(send(FileRequest(url: url)).identifier, done)
    }

    func task(_ task: APITask<FileRequest>, didFinishWith response: APIRawResponse) {
        callbacks.finish(task.identifier, ok: response.statusCode == 200)
    }

    func task(_ task: APITask<FileRequest>, didFailWith error: APIError) {
        callbacks.finish(task.identifier, ok: false)
    }
}

/// Completion closures by task identifier; a task may end before its closure is registered.
final class Callbacks: @unchecked Sendable {
    // @unchecked: both tables are only touched under `lock`.
    private let lock = NSLock()
    private var waiting: [UInt64: @Sendable (Bool) -> Void] = [:]
    private var ended: [UInt64: Bool] = [:]

    func register(_ identifier: UInt64, _ done: @escaping @Sendable (Bool) -> Void) {
        let early: Bool? = lock.withLock {
            if let ok = ended.removeValue(forKey: identifier) { return ok }
            waiting[identifier] = done
            return nil
        }
        if let early { done(early) }
    }

    func finish(_ identifier: UInt64, ok: Bool) {
        let done: (@Sendable (Bool) -> Void)? = lock.withLock {
            if let done = waiting.removeValue(forKey: identifier) { return done }
            ended[identifier] = ok
            return nil
        }
        done?(ok)
    }
}

// MARK: Main

let options = parseOptions()
guard let baseURL = options.baseURL else {
    FileHandle.standardError.write(
        Data("usage: HTTPBenchmark --url http://127.0.0.1:PORT [--requests N] [--rounds N] [--memory]\n".utf8))
    exit(64)
}
let raw = RawClient()
let raw2 = RawClient()
let api = FileAPI()
let bare = URLSessionTransport()
let small = baseURL.appendingPathComponent("small.json")
let large = baseURL.appendingPathComponent("large.bin")

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

if options.memoryOnly {
    // Peak resident memory after 2k and after 20k requests through the manager (8 in flight, 205 B).
    _ = measure(count: 500, inFlight: 8) { api.send(small, done: $0) }
    _ = measure(count: 1500, inFlight: 8) { api.send(small, done: $0) }
    let at2k = memory()
    _ = measure(count: 18_000, inFlight: 8) { api.send(small, done: $0) }
    let at20k = memory()
    print("| requests | peak RSS (KiB) | RSS now (KiB) |")
    print("|---:|---:|---:|")
    print("| 2,000 | \(at2k.peak) | \(at2k.resident) |")
    print("| 20,000 | \(at20k.peak) | \(at20k.resident) |")
    print("")
    print(
        String(
            format: "peak growth 2k → 20k: %+d KiB (%.1f%%)", at20k.peak - at2k.peak,
            Double(at20k.peak - at2k.peak) / Double(max(at2k.peak, 1)) * 100))
    exit(0)
}

// Warm both clients (connections, caches, lazy initialisation).
_ = measure(count: 200, inFlight: 8) { raw.send(small, done: $0) }
_ = measure(count: 200, inFlight: 8) { api.send(small, done: $0) }

print("\(options.requests) requests per run, \(options.rounds) rounds, runs alternating (raw first in odd rounds)")
print("")
print(
    "| body | in flight | raw URLSession req/s | manager req/s | req/s ratio | raw CPU µs/req | manager CPU µs/req | CPU ratio |"
)
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for (name, url) in [("205 B", small), ("64 KiB", large)] {
    for inFlight in [1, 8] {
        var rawSamples: [Sample] = []
        var apiSamples: [Sample] = []
        var rateRatios: [Double] = []
        var cpuRatios: [Double] = []
        for round in 0..<options.rounds {
            let rawFirst = round % 2 == 0
            var pair: [Sample] = []
            for useRaw in rawFirst ? [true, false] : [false, true] {
                let sample = measure(count: options.requests, inFlight: inFlight) { done in
                    if useRaw {
                        raw.send(url, done: done)
                    } else if experiment == "bare" {
                        _ = bare.send(URLRequest(url: url)) { result in
                            if case .success(let r) = result { done(r.statusCode == 200) } else { done(false) }
                        }
                    } else if experiment == "rawdelegate" {
                        raw2.send(url, done: done)
                    } else {
                        api.send(url, done: done)
                    }
                }
                pair.append(sample)
                if useRaw { rawSamples.append(sample) } else { apiSamples.append(sample) }
            }
            let (rawSample, apiSample) = rawFirst ? (pair[0], pair[1]) : (pair[1], pair[0])
            rateRatios.append(rawSample.seconds / apiSample.seconds)
            cpuRatios.append(apiSample.cpuSeconds / rawSample.cpuSeconds)
        }
        let count = Double(options.requests)
        let rawRate = count / median(rawSamples.map(\.seconds))
        let apiRate = count / median(apiSamples.map(\.seconds))
        let rawCPU = median(rawSamples.map(\.cpuSeconds)) / count * 1e6
        let apiCPU = median(apiSamples.map(\.cpuSeconds)) / count * 1e6
        print(
            String(
                format: "| %@ | %d | %.0f | %.0f | %.3fx | %.1f | %.1f | %.3fx |", name, inFlight, rawRate, apiRate,
                median(rateRatios), rawCPU, apiCPU, median(cpuRatios)))
    }
}
print("")
print(
    "Ratios are medians of per-round ratios (manager vs raw in the same round); req/s ratio > 1 and CPU ratio < 1 favour the manager."
)
