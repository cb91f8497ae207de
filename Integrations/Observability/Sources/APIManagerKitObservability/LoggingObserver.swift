import APIManagerKit
import Foundation
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Writes what an engine does to a swift-log `Logger`: one record per attempt (at
/// ``attemptLevel``, `.warning` when it failed or was answered `4xx`/`5xx`), a task that failed
/// for another reason than a cancellation or an ignoring policy at `.warning`, and every other step
/// at ``stepLevel``; each with OpenTelemetry's HTTP names as metadata (`http.request.method`,
/// `url.full` with its secrets redacted, `server.address`, `http.response.status_code`,
/// `error.type`) and the task's (`apimanager.task.id`, `apimanager.attempt`, `apimanager.policy`,
/// `apimanager.scope`). Never a secret: URLs are redacted by the library's one rule (`APISecrets`),
/// no header or body is written, and an error is named by its kind and status, not by what a
/// server or an underlying error wrote.
///
/// ```swift
/// var configuration = APIEngine.Configuration()
/// configuration.observers = [LoggingObserver(logger: Logger(label: "shop.api"))]
/// ```
public struct LoggingObserver: APIEngine.Observer {
    /// Where the records go (its own metadata and level apply).
    public let logger: Logger
    /// The level of an attempt that succeeded: `.info` unless given (`.debug` for a quieter log).
    public let attemptLevel: Logger.Level
    /// The level of the other steps (sent, waiting, started, a retry, a renewed credential, the
    /// end): `.debug` unless given.
    public let stepLevel: Logger.Level

    public init(logger: Logger, attemptLevel: Logger.Level = .info, stepLevel: Logger.Level = .debug) {
        self.logger = logger
        self.attemptLevel = attemptLevel
        self.stepLevel = stepLevel
    }

    public func observe(_ observation: APIEngine.Observation) {
        let task = observation.task
        switch observation.kind {
        case .attemptEnded(let report):
            let errorType = HTTPClientAttributes.errorType(of: report)
            let level = errorType == nil ? attemptLevel : .warning
            guard logger.logLevel <= level else { return }
            let url = report.redactedURL  // once: the redaction is most of a record's cost
            var metadata = Self.metadata(of: task)
            metadata[HTTPClientAttributes.attempt] = "\(report.attempt)"
            metadata[HTTPClientAttributes.method] = "\(HTTPClientAttributes.method(of: report.request).attribute)"
            metadata[HTTPClientAttributes.urlFull] = "\(url)"
            metadata[HTTPClientAttributes.serverAddress] = "\(HTTPClientAttributes.server(of: report.request).address)"
            // Seconds, to the microsecond (no binary noise such as 0.010000000000000002).
            metadata["http.client.request.duration"] = "\((report.transportDuration * 1e6).rounded() / 1e6)"
            if let status = report.statusCode { metadata[HTTPClientAttributes.statusCode] = "\(status)" }
            if let version = report.protocolVersion { metadata[HTTPClientAttributes.protocolVersion] = "\(version)" }
            if let errorType { metadata[HTTPClientAttributes.errorType] = "\(errorType)" }
            let outcome = report.statusCode.map(String.init) ?? "failed (\(errorType ?? "error"))"
            logger.log(level: level, "\(report.method) \(url) → \(outcome)", metadata: metadata)
        case .ended(.failure(let error)):
            let routine: Bool
            switch error {
            case .cancelled, .ignored: routine = true
            default: routine = false
            }
            let level = routine ? stepLevel : .warning
            guard logger.logLevel <= level else { return }
            let errorType = HTTPClientAttributes.errorType(of: error)
            var metadata = Self.metadata(of: task)
            metadata[HTTPClientAttributes.errorType] = "\(errorType)"
            logger.log(level: level, "task ended: \(errorType)", metadata: metadata)
        default:
            // Checked before anything is formatted: most steps are not logged.
            guard logger.logLevel <= stepLevel else { return }
            logger.log(level: stepLevel, "\(Self.step(observation.kind))", metadata: Self.metadata(of: task))
        }
    }

    /// A notice about the engine: a circuit opened (`.warning`) or closed again (at
    /// ``attemptLevel``), a retry the retry budget refused (`.warning`, the error by its kind), a
    /// delivery queue nobody runs (`.warning`); with the task's metadata and `apimanager.origin`
    /// when it has them.
    public func notice(_ notice: APIEngine.Notice) {
        let level: Logger.Level = notice.kind == .circuitClosed ? attemptLevel : .warning
        guard logger.logLevel <= level else { return }
        var metadata = notice.task.map(Self.metadata(of:)) ?? [:]
        metadata["apimanager.notice"] = "\(notice.kind)"
        if let attempt = notice.attempt { metadata[HTTPClientAttributes.attempt] = "\(attempt)" }
        if let origin = notice.origin { metadata["apimanager.origin"] = "\(origin)" }
        let message: String
        if let error = notice.error {
            // Named by its kind, never by what a server wrote.
            let errorType = HTTPClientAttributes.errorType(of: error)
            metadata[HTTPClientAttributes.errorType] = "\(errorType)"
            message = "\(notice.kind): \(errorType)"
        } else {
            message = notice.description
        }
        logger.log(level: level, "\(message)", metadata: metadata)
    }

    /// The task's metadata.
    private static func metadata(of task: AnyAPITask) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            HTTPClientAttributes.taskIdentifier: "\(task.identifier)",
            HTTPClientAttributes.policy: "\(task.concurrencyPolicy.rawValue)",
        ]
        if let scope = task.concurrencyScope { metadata[HTTPClientAttributes.scope] = "\(scope)" }
        return metadata
    }

    /// A step's message (other than an attempt's end and a task's failure).
    static func step(_ kind: APIEngine.Observation.Kind) -> String {
        switch kind {
        case .sent: return "task sent"
        case .waiting(let ahead?): return "task waits, \(ahead) ahead in its line"
        case .waiting(nil): return "task waits"
        case .waitingForNetwork: return "task waits for the network"
        case .started(let attempt): return "attempt \(attempt) begins"
        case .attemptSent(let attempt, _, let sharedWith?):
            return "attempt \(attempt) joined task \(sharedWith)'s request"
        case .attemptSent(let attempt, _, nil): return "attempt \(attempt) sent"
        case .attemptEnded(let report): return "attempt \(report.attempt) answered"
        case .renewingCredential(let attempt): return "attempt \(attempt) waits for a renewed credential"
        case .responseBuilt(let attempt, let duration): return "attempt \(attempt) response built in \(duration) s"
        case .cachedCopy: return "task given a stored copy"
        case .retryScheduled(let delay, let error):
            return "task retries in \(delay) s after \(HTTPClientAttributes.errorType(of: error))"
        case .ended(.success(let source)): return "task finished (\(source))"
        case .ended(.failure(let error)): return "task ended: \(HTTPClientAttributes.errorType(of: error))"
        }
    }
}
