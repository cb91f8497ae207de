import APIManagerKit
import Foundation
import Metrics

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Records what an engine does as swift-metrics metrics, named as OpenTelemetry's HTTP client
/// conventions name them where they do:
///
/// | metric | kind | dimensions |
/// |---|---|---|
/// | `http.client.request.duration` | timer (seconds preferred): each attempt the transport answered or failed | `http.request.method`, `server.address`, `server.port`, `http.response.status_code`, `error.type` |
/// | `http.client.active_requests` | meter: attempts on the wire | `http.request.method`, `server.address`, `server.port` |
/// | `apimanager.task.line.duration` | timer: from a task's send to its first attempt | `apimanager.policy` (and `apimanager.scope` when asked) |
/// | `apimanager.task.retries` | counter: retries scheduled | `apimanager.policy` (and `apimanager.scope`) |
/// | `apimanager.credential.renewals` | counter: attempts that waited for a renewed credential | |
/// | `apimanager.tasks` | counter: ended tasks | `apimanager.policy`, `apimanager.outcome` (`finished`, `cancelled`, `ignored`, `failed`) |
///
/// ```swift
/// var configuration = APIEngine.Configuration()
/// configuration.observers = [MetricsObserver()]   // MetricsSystem's factory, as bootstrapped
/// ```
///
/// The scope is left out of the dimensions unless ``init(factory:scopeDimension:)`` asks for it: a
/// scope made of an identifier (a document's, a user's) would make one series per value.
public final class MetricsObserver: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: `tasks` is read and written only under `lock`; the rest never changes.
    private let factory: any MetricsFactory
    private let scopeDimension: Bool
    private let lock = NSLock()
    /// What is remembered of each task until it ends: when it was sent, and its attempts on the wire
    /// (with the dimensions their meter was raised with). By the task itself, not its identifier:
    /// engines number their tasks each from 1, and one observer may serve several.
    private var tasks: [ObjectIdentifier: TaskState] = [:]

    private struct TaskState {
        var sent: TimeInterval?
        var onTheWire: [Int: [(String, String)]] = [:]
    }

    /// - Parameters:
    ///   - factory: where the metrics go: `MetricsSystem.factory` (as bootstrapped) unless given.
    ///   - scopeDimension: whether the line and retry metrics carry the scope; `false` unless given.
    public init(factory: any MetricsFactory = MetricsSystem.factory, scopeDimension: Bool = false) {
        self.factory = factory
        self.scopeDimension = scopeDimension
    }

    public func observe(_ observation: APIEngine.Observation) {
        let task = observation.task
        switch observation.kind {
        case .sent:
            lock.withLock { tasks[ObjectIdentifier(task), default: TaskState()].sent = observation.time }
        case .started(attempt: 1):
            guard
                let sent = lock.withLock({ () -> TimeInterval? in
                    defer { tasks[ObjectIdentifier(task)]?.sent = nil }
                    return tasks[ObjectIdentifier(task)]?.sent
                })
            else { return }
            Timer(
                label: "apimanager.task.line.duration", dimensions: taskDimensions(of: task),
                preferredDisplayUnit: .seconds, factory: factory
            ).recordSeconds(max(0, observation.time - sent))
        case .attemptSent(let attempt, let request, nil):
            let dimensions = Self.serverDimensions(of: request)
            lock.withLock { tasks[ObjectIdentifier(task), default: TaskState()].onTheWire[attempt] = dimensions }
            Meter(label: "http.client.active_requests", dimensions: dimensions, factory: factory).increment()
        case .attemptEnded(let report):
            if let raised = lock.withLock({
                tasks[ObjectIdentifier(task)]?.onTheWire.removeValue(forKey: report.attempt)
            }) {
                Meter(label: "http.client.active_requests", dimensions: raised, factory: factory).decrement()
            }
            var dimensions = Self.serverDimensions(of: report.request)
            if let version = report.protocolVersion {
                dimensions.append((HTTPClientAttributes.protocolVersion, version))
            }
            if let status = report.statusCode { dimensions.append((HTTPClientAttributes.statusCode, String(status))) }
            if let errorType = HTTPClientAttributes.errorType(of: report) {
                dimensions.append((HTTPClientAttributes.errorType, errorType))
            }
            Timer(
                label: "http.client.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds,
                factory: factory
            ).recordSeconds(max(0, report.transportDuration))
        case .retryScheduled:
            Counter(label: "apimanager.task.retries", dimensions: taskDimensions(of: task), factory: factory)
                .increment()
        case .renewingCredential:
            Counter(label: "apimanager.credential.renewals", factory: factory).increment()
        case .ended(let result):
            // An attempt still on the wire when its task ended (cancelled, timed out) leaves it.
            let left = lock.withLock {
                tasks.removeValue(forKey: ObjectIdentifier(task))?.onTheWire.values.map { $0 } ?? []
            }
            for raised in left {
                Meter(label: "http.client.active_requests", dimensions: raised, factory: factory).decrement()
            }
            Counter(
                label: "apimanager.tasks",
                dimensions: [
                    (HTTPClientAttributes.policy, task.concurrencyPolicy.rawValue),
                    ("apimanager.outcome", Self.outcome(result)),
                ], factory: factory
            ).increment()
        case .waiting, .waitingForNetwork, .started, .attemptSent, .responseBuilt, .cachedCopy:
            break
        }
    }

    private func taskDimensions(of task: AnyAPITask) -> [(String, String)] {
        var dimensions = [(HTTPClientAttributes.policy, task.concurrencyPolicy.rawValue)]
        if scopeDimension { dimensions.append((HTTPClientAttributes.scope, task.concurrencyScope ?? "")) }
        return dimensions
    }

    static func serverDimensions(of request: URLRequest) -> [(String, String)] {
        let server = HTTPClientAttributes.server(of: request)
        var dimensions = [
            (HTTPClientAttributes.method, HTTPClientAttributes.method(of: request).attribute),
            (HTTPClientAttributes.serverAddress, server.address),
        ]
        if let port = server.port { dimensions.append((HTTPClientAttributes.serverPort, String(port))) }
        return dimensions
    }

    static func outcome(_ result: Result<APIResponseCache.Source, APIError>) -> String {
        switch result {
        case .success: return "finished"
        case .failure(.cancelled): return "cancelled"
        case .failure(.ignored): return "ignored"
        case .failure: return "failed"
        }
    }
}
