import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the engine's ``APIEngine/eventMonitor`` is told about each network attempt, with timings:
/// a line per event for a log, without subclassing anything.
///
/// ```swift
/// manager.engine.eventMonitor = { event in print(event) }
/// // → GET https://api.example.com/items?page=2 (task 7, attempt 1)
/// // ← 200 GET https://api.example.com/items?page=2 in 42.1 ms, 1832 bytes (task 7, attempt 1)
/// ```
public struct APIEvent: Sendable, CustomStringConvertible {
    /// What happened to the attempt.
    public enum Kind: Sendable {
        /// The request was handed to the transport.
        case started
        /// The attempt joined the identical request that task `leaderTask`'s attempt has in flight
        /// (see ``APIConcurrencyPolicy/Sharing``): nothing more is sent for it, and it gets that answer.
        case joined(leaderTask: UInt64)
        /// The attempt ended: a raw response (any status) or an error. Not sent for attempts whose
        /// task ended first (cancelled, timed out): their answer is dropped.
        case finished(Result<APIRawResponse, APIError>)
        /// This attempt's failure opened the circuit of its origin (see ``APIEngine/CircuitBreaker``): the
        /// next attempts fail at once for `closesIn` seconds.
        case circuitOpened(origin: String, closesIn: TimeInterval)
        /// This attempt, the probe of a half-open circuit, succeeded: the circuit of its origin is
        /// closed again.
        case circuitClosed(origin: String)
        /// The retry the task would have made was refused by the engine's ``APIEngine/RetryBudget``: the task
        /// ends with the attempt's error.
        case retryRefused(APIError)
    }

    /// What happened.
    public let kind: Kind
    /// The task's ``AnyAPITask/identifier``.
    public let taskIdentifier: UInt64
    /// The attempt's number, 1 for the first.
    public let attempt: Int
    /// The request as sent, secrets included: print ``description`` or
    /// ``cURLDescription(revealingSecrets:)``, which redact them; `nil` when it could not be built.
    public let request: URLRequest?
    /// Seconds from handing the request to the transport to its answer; `nil` for `.started`.
    public let duration: TimeInterval?
    /// Names treated as secrets for this request beyond the standard rule (see ``APISecrets``).
    let sensitiveHeaders: Set<String>

    init(
        kind: Kind, taskIdentifier: UInt64, attempt: Int, request: URLRequest?, duration: TimeInterval?,
        sensitiveHeaders: Set<String>
    ) {
        self.kind = kind
        self.taskIdentifier = taskIdentifier
        self.attempt = attempt
        self.request = request
        self.duration = duration
        self.sensitiveHeaders = sensitiveHeaders
    }

    /// The request as a cURL command, secrets redacted unless `revealingSecrets` is `true`.
    public func cURLDescription(revealingSecrets: Bool = false) -> String {
        guard let request else { return "# the request could not be built" }
        return request.cURLDescription(revealingSecrets: revealingSecrets, secretNames: sensitiveHeaders)
    }

    /// One line for a log, with the URL's secrets redacted (see ``APISecrets``).
    public var description: String {
        let method = request?.httpMethod ?? "?"
        let url = request?.url.map { APISecrets.redacted($0, additionalNames: sensitiveHeaders) } ?? "(no request)"
        let suffix = "(task \(taskIdentifier), attempt \(attempt))"
        switch kind {
        case .started:
            return "→ \(method) \(url) \(suffix)"
        case .joined(let leader):
            return "⇢ \(method) \(url) joined task \(leader)'s attempt \(suffix)"
        case .finished(let result):
            let time = duration.map { String(format: " in %.1f ms", $0 * 1000) } ?? ""
            switch result {
            case .success(let response):
                return "← \(response.statusCode) \(method) \(url)\(time), \(response.body.count) bytes \(suffix)"
            case .failure(let error):
                return "✕ \(method) \(url)\(time): \(error) \(suffix)"
            }
        case .circuitOpened(let origin, let closesIn):
            return "⊘ circuit of \(origin) opened for \(closesIn) s \(suffix)"
        case .circuitClosed(let origin):
            return "◯ circuit of \(origin) closed \(suffix)"
        case .retryRefused(let error):
            return "✕ retry refused by the budget after \(error) \(suffix)"
        }
    }
}
