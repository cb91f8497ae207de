import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The server Scripts/integration-server.sh started, from the environment.
enum Server {
    static let base = ProcessInfo.processInfo.environment["APIMANAGERKIT_TEST_SERVER"].flatMap(URL.init(string:))
    /// The same server on another port: another origin, for cross-origin redirects.
    static let second = ProcessInfo.processInfo.environment["APIMANAGERKIT_TEST_SERVER_2"].flatMap(URL.init(string:))
    /// The hostile raw-socket server (Tests/IntegrationServer/raw_server.py).
    static let raw = ProcessInfo.processInfo.environment["APIMANAGERKIT_RAW_SERVER"].flatMap(URL.init(string:))
    static let isAvailable = base != nil && second != nil && raw != nil
    static let skipReason: Comment =
        "APIMANAGERKIT_TEST_SERVER is not set: the integration suite is SKIPPED. Run `bash Scripts/test.sh`, which starts the server."
    static var url: URL { base ?? URL(fileURLWithPath: "/") }
    static var secondURL: URL { second ?? URL(fileURLWithPath: "/") }
    static var rawURL: URL { raw ?? URL(fileURLWithPath: "/") }
}

/// A request with every input stored.
struct HTTPRequest: APIRequest {
    var url = Server.url
    var path: String
    var method: HTTPMethod = .get
    var headers: [String: String] = [:]
    var parameters: APIParameters = .none
    var bodyEncoding: APIParameters.BodyEncoding = .json
    var body: APIRequestBody?
    var authorization: APIAuthentication.Authorization?
    var timeout: TimeInterval = 30
    var retryPolicy: APIRetryPolicy?
    var concurrencyPolicy: APIConcurrencyPolicy = .default
    var concurrencyLimit = 4
    var sharing: APIConcurrencyPolicy.Sharing = .never
    var group: APIConcurrencyPolicy.Group?
    var concurrencyGroup: APIConcurrencyPolicy.Group? { group }
    var acceptableStatusCodes: APIStatusCodes = .success
    var maxBodySize: Int? = APIRequestDefaults.maxResponseBodySize
    var maxResponseBodySize: Int? { maxBodySize }

    init(_ path: String, method: HTTPMethod = .get, parameters: APIParameters = .none) {
        self.path = path
        self.method = method
        self.parameters = parameters
    }

    /// A GET of exactly `url` (a page link, say).
    init(absolute url: URL) {
        self.url = url
        self.path = ""
    }
}

/// What httpbin echoes about the request it parsed.
struct Echoed: APIResponse, Decodable {
    var args: [String: APIValue]?
    var form: [String: APIValue]?
    var json: APIValue?
    var data: String?
    var headers: [String: String]?
    var url: String?
    var method: String?

    func header(_ name: String) -> String? {
        headers?.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}

final class Client<Response: APIResponse>: APIManager {
    typealias Request = HTTPRequest
    let engine: APIEngine
    init(_ engine: APIEngine) { self.engine = engine }
    convenience init(
        transport: any APITransport = Shared.transport, persisted: APIAuthentication.PersistedHeaders? = nil,
        cookies: APICookieStore? = nil
    ) {
        self.init(APIEngine(transport: transport, delivery: .inline, persistedHeaders: persisted, cookies: cookies))
    }
}

enum Shared {
    static let transport = TransportUnderTest.make()
}

/// The error a call failed with, or nil when it succeeded.
func failure<Response>(_ call: () async throws(APIError) -> Response) async -> APIError? {
    do {
        _ = try await call()
        return nil
    } catch {
        return error
    }
}

/// Tells when tasks end, from the delegate's terminal events (the clients deliver `.inline`),
/// so a test awaits a task's end instead of polling its state.
final class TaskEnds: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `ended` and `waiters` are only touched under `lock`.
    private let lock = NSLock()
    private var ended: Set<UInt64> = []
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]

    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        end(task)
    }

    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) {
        end(task)
    }

    private func end(_ task: AnyAPITask) {
        let waiter = lock.withLock {
            ended.insert(task.identifier)
            return waiters.removeValue(forKey: task.identifier)
        }
        waiter?.resume()
    }

    /// Returns once the task has ended (at once if it already has).
    func waitForEnd(of task: AnyAPITask) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let hasEnded = lock.withLock {
                if ended.contains(task.identifier) { return true }
                waiters[task.identifier] = continuation
                return false
            }
            if hasEnded { continuation.resume() }
        }
    }
}

/// The most memory the process has held so far, in bytes (`getrusage`'s high-water mark).
func peakResidentBytes() -> Int {
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    return Int(usage.ru_maxrss)
    #else
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss) * 1024
    #endif
}

/// Whether this process runs under ThreadSanitizer, whose shadow memory makes memory figures
/// meaningless.
#if canImport(Darwin)
let runsUnderThreadSanitizer = dlsym(UnsafeMutableRawPointer(bitPattern: -2), "__tsan_init") != nil
#else
let runsUnderThreadSanitizer = dlsym(nil, "__tsan_init") != nil  // nil is RTLD_DEFAULT on glibc
#endif
