import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let testBaseURL = URL(string: "https://api.test")!

struct TestRequest: APIRequest {
    var url = testBaseURL
    var path: String
    var method: HTTPMethod = .get
    var concurrencyPolicy: APIConcurrencyPolicy = .default
    var concurrencyScope: String?
    var priority = 0
    var concurrencyLimit = 4
    var sharing: APIConcurrencyPolicy.Sharing = .never
    var lineLimit: APIConcurrencyPolicy.LineLimit?
    var group: APIConcurrencyPolicy.Group?
    var concurrencyGroup: APIConcurrencyPolicy.Group? { group }
    var retryPolicy: APIRetryPolicy?
    var deadline: TimeInterval?
    var headers: [String: String] = [:]
    var cacheOption: APIResponseCache.Option = .networkOnly
    var shouldSaveInCache = true
    var cachePartition: String?
    var cachesAuthenticatedResponses = false
    var idempotencyKey: APIIdempotencyKey?
    var connectivityWait: TimeInterval?

    init(
        _ path: String, _ policy: APIConcurrencyPolicy = .default, scope: String? = nil, method: HTTPMethod = .get,
        retry: APIRetryPolicy? = nil, deadline: TimeInterval? = nil
    ) {
        self.path = path
        self.concurrencyPolicy = policy
        self.concurrencyScope = scope
        self.method = method
        self.retryPolicy = retry
        self.deadline = deadline
    }
}

/// What a durable task of a test request keeps on disk: its path, method, policy, scope and
/// whether it declares an idempotency key (the settings the durable tests read back).
extension TestRequest: Codable {
    private enum CodingKeys: String, CodingKey {
        case path, method, policy, scope, idempotent
    }

    /// None: an `Encodable` request would otherwise send itself as its parameters.
    var parameters: APIParameters { .none }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try container.decode(String.self, forKey: .path),
            try container.decode(String.self, forKey: .policy).policy(at: container.codingPath),
            scope: try container.decodeIfPresent(String.self, forKey: .scope),
            method: HTTPMethod(rawValue: try container.decode(String.self, forKey: .method)))
        if try container.decode(Bool.self, forKey: .idempotent) { idempotencyKey = .standard }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(method.rawValue, forKey: .method)
        try container.encode(concurrencyPolicy.rawValue, forKey: .policy)
        try container.encodeIfPresent(concurrencyScope, forKey: .scope)
        try container.encode(idempotencyKey != nil, forKey: .idempotent)
    }
}

extension String {
    fileprivate func policy(at path: [any CodingKey]) throws -> APIConcurrencyPolicy {
        guard let policy = APIConcurrencyPolicy(rawValue: self) else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "no policy \(self)"))
        }
        return policy
    }
}

/// A folder of its own in the temporary directory, removed with everything in it when released.
final class TemporaryFolder: @unchecked Sendable {
    // @unchecked: one immutable URL.
    let url: URL

    init(_ name: String = "test") {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

struct Echo: APIResponse, Decodable, Equatable {
    var value: String?
}

final class TestManager: APIManager {
    typealias Request = TestRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// Always returns the same number, so jittered delays are exact.
struct FixedRandom: APIRetryPolicy.RandomSource {
    var value: Double
    func nextUnitInterval() -> Double { value }
}

/// Records every event as a line such as `"3 start 1"`, `"3 retry 0.5"`, `"3 failed cancelled(policy)"`.
final class EventRecorder: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    /// Runs inside each callback, for re-entrancy tests.
    var onEvent: (@Sendable (String) -> Void)?

    var events: [String] { lock.withLock { lines } }

    func events(of task: AnyAPITask) -> [String] {
        let prefix = "\(task.identifier) "
        return events.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    private func record(_ line: String) {
        lock.withLock { lines.append(line) }
        onEvent?(line)
    }

    func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask) {
        record("\(task.identifier) waiting")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {
        record("\(task.identifier) start \(attempt)")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, willRetryAfter delay: Double, error: APIError) {
        record("\(task.identifier) retry \(delay)")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReport progress: APITransferProgress) {
        record("\(task.identifier) \(progress)")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReceiveCachedResponse response: any APIResponse) {
        record("\(task.identifier) cached")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        record("\(task.identifier) finished")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) {
        record("\(task.identifier) failed \(describe(error))")
    }
}

func describe(_ error: APIError) -> String {
    switch error {
    case .cancelled(let reason): return "cancelled(\(reason))"
    case .ignored: return "ignored"
    case .timedOut: return "timedOut"
    case .transport(let error): return "transport(\((error as? URLError)?.code.rawValue ?? -1))"
    case .invalidRequest: return "invalidRequest"
    case .unacceptableStatus(let response, _): return "status(\(response.statusCode))"
    case .decoding: return "decoding"
    case .rejected: return "rejected"
    case .responseTooLarge(let limit): return "responseTooLarge(\(limit))"
    case .authenticationFailed(let error): return "authenticationFailed(\(error))"
    case .lineFull(let maxLength): return "lineFull(\(maxLength))"
    case .waitedTooLong(let maxWait): return "waitedTooLong(\(maxWait))"
    case .circuitOpen(let origin, let closesIn): return "circuitOpen(\(origin), \(closesIn))"
    case .durableStore(let reason, _): return "durableStore(\(reason))"
    }
}

/// An engine on a mock transport and a virtual clock told to `observers`; inline unless told, with
/// a circuit breaker and a retry budget when given.
func observedEngine(
    _ observers: [any APIEngine.Observer], transport: MockTransport, clock: TestClock,
    delivery: APIEngine.Delivery = .inline, execution: APIEngine.Execution = .inline,
    circuitBreaker: APIEngine.CircuitBreaker? = nil, retryBudget: APIEngine.RetryBudget? = nil
) -> APIEngine {
    var configuration = APIEngine.Configuration()
    configuration.circuitBreaker = circuitBreaker
    configuration.retryBudget = retryBudget
    configuration.transport = transport
    configuration.clock = clock
    configuration.delivery = delivery
    configuration.execution = execution
    configuration.observers = observers
    return APIEngine(configuration: configuration)
}

/// A manager on a virtual clock and a mock transport, delivering events immediately.
final class Harness: @unchecked Sendable {
    // @unchecked: the members are immutable references to thread-safe objects.
    let clock: TestClock
    let transport: MockTransport
    let manager: TestManager
    let recorder = EventRecorder()

    init(
        clock: TestClock = TestClock(), random: Double = 0.5, interceptors: [any APIInterceptor] = [],
        authentication: APIAuthentication? = nil,
        defaultHeaders: APIEngine.DefaultHeaders = .standard, durableStore: APIEngine.DurableStore? = nil,
        connectivity: MockTransport.Connectivity? = nil, observers: [any APIEngine.Observer] = []
    ) {
        self.clock = clock
        transport = MockTransport(clock: clock)
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.randomSource = FixedRandom(value: random)
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.interceptors = interceptors
        configuration.authentication = authentication
        configuration.defaultHeaders = defaultHeaders
        configuration.durableStore = durableStore
        configuration.connectivity = connectivity
        configuration.observers = observers
        manager = TestManager(engine: APIEngine(configuration: configuration))
        manager.delegate = recorder
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        transport.stub(nil, "/slow", MockTransport.Reply.json(#"{"value":"slow"}"#).after(1))
        transport.stub(nil, "/held", MockTransport.Reply.json(#"{"value":"held"}"#).held())
    }

    @discardableResult
    func send(_ request: TestRequest) -> APITask<TestRequest> { manager.send(request) }

    /// The transport's records for a path, in arrival order.
    func records(_ path: String) -> [MockTransport.Record] {
        transport.records.filter { $0.path == path }
    }
}

extension AnyAPITask.State {
    var name: String {
        switch self {
        case .waiting: return "waiting"
        case .running: return "running"
        case .waitingForRetry: return "waitingForRetry"
        case .finished: return "finished"
        case .failed(let error): return describe(error)
        }
    }
}

/// A value behind a lock, for tests.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&value) }
    }
}

/// A manager whose `urlRequest(for:)` is the closure it was given, on the harness's transport and clock.
final class RequestHookManager: APIManager, @unchecked Sendable {
    // @unchecked: immutable after init; the closure is Sendable.
    typealias Request = TestRequest
    typealias Response = Echo
    let engine: APIEngine
    private let makeRequest: @Sendable (APITask<TestRequest>) throws -> URLRequest

    init(
        _ harness: Harness, interceptors: [any APIInterceptor] = [],
        urlRequest: @escaping @Sendable (APITask<TestRequest>) throws -> URLRequest
    ) {
        engine = APIEngine(
            transport: harness.transport, clock: harness.clock, delivery: .inline, execution: .inline,
            interceptors: interceptors)
        makeRequest = urlRequest
    }

    func urlRequest(for task: APITask<TestRequest>) throws -> URLRequest { try makeRequest(task) }
}

/// Something to cancel that the scheduling and refresh machines only name in their actions (a
/// transport request, a timer, an async step): compared by identity, cancelling it does nothing.
final class NamedHandle: APICancellable, @unchecked Sendable {
    // @unchecked: no state.
    func cancel() {}
}

/// A test transport written against the options seam alone: `send(_:completion:)` forwards to it
/// with no options.
protocol OptionsTransport: APITransport {
    func send(
        _ request: URLRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable
}

extension OptionsTransport {
    func send(
        _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, options: APITransportOptions(), completion: completion)
    }
}

/// Keeps the options and completion of the last request sent, so the test writes the download's file
/// or the stream (``file``, ``stream``) and answers when it says, even after a cancellation (as
/// URLSession delivers what it already read). For engines that run inline: touched by the test's
/// thread only.
final class HeldSinkTransport: OptionsTransport, @unchecked Sendable {
    // @unchecked: touched by the test's thread only (the engine runs inline).
    private(set) var options: APITransportOptions?
    private(set) var completion: (@Sendable (Result<APIRawResponse, any Error>) -> Void)?
    private(set) var cancelled = false
    var file: APIResponseBodyFile? { options?.responseBody as? APIResponseBodyFile }
    var stream: APIResponseBodyStream? { options?.responseBody as? APIResponseBodyStream }

    func send(
        _ request: URLRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        self.options = options
        self.completion = completion
        return Cancel(transport: self)
    }

    private struct Cancel: APICancellable, @unchecked Sendable {
        // @unchecked: as the transport.
        let transport: HeldSinkTransport
        func cancel() { transport.cancelled = true }
    }
}

/// Consumes `events` on another task while the test moves `clock` a quarter second at a time
/// (while a timer is pending), until the stream ends (or 20,000 turns pass: a starved consumer under ThreadSanitizer gets its turns);
/// each event as `id:data` (`-` for no ID), and the error it ended with.
func drainEvents(_ events: APIServerSentEvent.Stream, clock: TestClock) async -> ([String], (any Error)?) {
    let result = Locked<([String], (any Error)?)?>(nil)
    let consumer = Task {
        var seen: [String] = []
        do {
            for try await event in events { seen.append("\(event.id ?? "-"):\(event.data)") }
            result.withLock { $0 = (seen, nil) }
        } catch {
            result.withLock { $0 = (seen, error) }
        }
    }
    for _ in 0..<20_000 where result.withLock({ $0 == nil }) {
        await Task.yield()
        // Time moves only while something waits for it: a consumer that has not yet seen a drop
        // (starved, under ThreadSanitizer) starts its reconnection wait at the drop's time.
        if clock.pendingTimerCount > 0 { clock.advance(by: 0.25) }
    }
    consumer.cancel()
    return result.withLock { $0 } ?? ([], CancellationError())
}

/// The tests that spool a form to the temporary directory, or count the spooled files there, take
/// turns: a count must not see another suite's file, written or removed while it looks (the suites
/// run in parallel).
enum SpoolingTurns {
    private static let lock = NSLock()

    static func take<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
