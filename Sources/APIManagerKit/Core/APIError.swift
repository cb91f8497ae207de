import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one error type of APIManagerKit: every task that does not finish with a response fails with
/// an `APIError`, delivered to the delegate's failure method and thrown by the async API.
///
/// A minor release may add a case (the CHANGELOG says so when it does). A `switch` that names every
/// case ends with `@unknown default:`: it compiles without a warning today, and still compiles when
/// a case is added (the compiler then warns and names it). See "Switching over every kind" in the
/// Talking HTTP article.
public enum APIError: Error, Sendable {
    /// The task was cancelled before it finished; it is never retried.
    case cancelled(reason: CancellationReason)
    /// The task was sent under ``APIConcurrencyPolicy/ignoreCurrent`` while its scope was busy, and
    /// was never sent.
    case ignored
    /// The request's overall ``APIRequest/deadline`` passed before the task finished.
    case timedOut(deadline: TimeInterval, attempts: Int)
    /// The transport failed (no connection, DNS, TLS, a per-attempt timeout …). `underlying` is the
    /// transport's own error, a `URLError` for ``URLSessionTransport``.
    case transport(underlying: any Error)
    /// The request could not be turned into a `URLRequest`: a bad URL, a body that failed to encode,
    /// a hook that threw.
    case invalidRequest(reason: String, underlying: (any Error)? = nil)
    /// The server answered with a status the request does not accept. The raw response keeps the
    /// status, headers and body; `message` is what the manager's ``APIManager/errorMessage(in:)``
    /// found in the body (by default `message`, `msg`, `error`, `err`, `error_description` or
    /// `errors[0].message`).
    case unacceptableStatus(APIRawResponse, message: String? = nil)
    /// The body could not be decoded into the response type. Never retried.
    case decoding(underlying: any Error, response: APIRawResponse)
    /// The response type's initializer rejected an otherwise well-formed response (for example an
    /// envelope whose `code` says failure). `underlying` is what it threw.
    case rejected(underlying: any Error, response: APIRawResponse)
    /// The response body grew past the request's ``APIRequest/maxResponseBodySize`` (counted after
    /// decompression); the transfer was cancelled. Never retried.
    case responseTooLarge(limit: Int)
    /// The server refused the credential and it could not be renewed: the authenticator's
    /// ``APIAuthentication/Authenticator/refresh(_:)`` threw `underlying`, or refreshes came too often
    /// (``APIAuthentication/RefreshError/tooManyRefreshes(limit:window:)``). Every task waiting for
    /// that refresh fails with it; the next request may start a new refresh. Never retried.
    case authenticationFailed(underlying: any Error)
    /// The task would have joined its scope's line behind `maxLength` waiting tasks, the most its
    /// request's ``APIRequest/lineLimit`` allows; it ended at once and nothing was sent.
    case lineFull(maxLength: Int)
    /// The task waited in its scope's line for `maxWait` seconds, the longest its request's
    /// ``APIRequest/lineLimit`` allows, without starting; it left the line and nothing was sent.
    case waitedTooLong(maxWait: TimeInterval)
    /// The engine's ``APIEngine/CircuitBreaker`` has opened the circuit of the request's origin after
    /// repeated transient failures; the attempt failed at once and nothing was sent. The circuit lets
    /// a probe through in `closesIn` seconds (`0`: a probe is out now).
    case circuitOpen(origin: String, closesIn: TimeInterval)
    /// A ``APIConcurrencyPolicy/durable`` task could not be kept on disk, so it was never sent (no
    /// ``APIEngine/Configuration/durableStore``, a request that is not `Codable`, a full disk, its
    /// scope open in another process); or a replayed record could not be sent again (damaged, or a
    /// request that no longer decodes: ``APIEngine/DurableStore/SetAside``). `underlying` is the
    /// file system's or the coder's error, when there is one. Never retried.
    case durableStore(reason: String, underlying: (any Error)? = nil)

    /// Why a task was cancelled.
    public enum CancellationReason: String, Sendable, Hashable {
        /// ``AnyAPITask/cancel()``, ``APIManager/cancelAll()`` or ``APIManager/cancelTasks(where:)``.
        case explicit
        /// A later task of the same scope replaced it under that task's policy:
        /// ``APIConcurrencyPolicy/cancelOthers`` (sent) or ``APIConcurrencyPolicy/debounceLatest``
        /// (started) ended every other task of the scope; a ``APIConcurrencyPolicy/conflate`` task
        /// replaced the waiting ones; a ``APIConcurrencyPolicy/debounce`` or `debounceLatest` task
        /// replaced one of its own policy still in its quiet interval.
        case policy
        /// The Swift task awaiting ``APIManager/response(for:)`` was cancelled.
        case concurrency
        /// The manager was released while the task was in flight.
        case managerReleased
    }
}

extension APIError {
    /// `true` for ``cancelled(reason:)``, whatever the reason.
    public var isCancellation: Bool {
        if case .cancelled = self { return true }
        return false
    }

    /// `true` for ``ignored``.
    public var isIgnored: Bool {
        if case .ignored = self { return true }
        return false
    }

    /// `true` for ``timedOut(deadline:attempts:)`` and for a transport error that is a timeout.
    public var isTimeout: Bool {
        switch self {
        case .timedOut: return true
        case .transport(let error): return (error as? URLError)?.code == .timedOut
        default: return false
        }
    }

    /// The raw response, when the failure came with one.
    public var response: APIRawResponse? {
        switch self {
        case .unacceptableStatus(let response, _), .decoding(_, let response), .rejected(_, let response):
            return response
        default:
            return nil
        }
    }

    /// The server's own explanation of an unacceptable status, when its body had one.
    public var serverMessage: String? {
        if case .unacceptableStatus(_, let message) = self { return message }
        return nil
    }

    /// The HTTP status code, when the failure came with a response.
    public var statusCode: Int? { response?.statusCode }

    /// The response body, when the failure came with a response.
    public var responseBody: Data? { response?.body }

    /// The error this one wraps: the transport's, the decoder's, the response type's or a hook's.
    public var underlyingError: (any Error)? {
        switch self {
        case .transport(let error), .decoding(let error, _), .rejected(let error, _): return error
        case .authenticationFailed(let error): return error
        case .invalidRequest(_, let error), .durableStore(_, let error): return error
        default: return nil
        }
    }

    /// Wraps any error thrown by user code or a transport: an `APIError` stays as it is, anything else
    /// becomes ``transport(underlying:)``.
    static func wrapTransport(_ error: any Error) -> APIError {
        error as? APIError ?? .transport(underlying: error)
    }
}

extension APIError: LocalizedError, CustomStringConvertible {
    public var errorDescription: String? { description }

    public var description: String {
        switch self {
        case .cancelled(let reason):
            switch reason {
            case .explicit: return "The request was cancelled."
            case .policy:
                return "The request was replaced by a newer request of its scope "
                    + "(its concurrency policy: cancelOthers, conflate, debounce or debounceLatest)."
            case .concurrency: return "The request was cancelled because its Swift task was cancelled."
            case .managerReleased: return "The request was cancelled because its manager was released."
            }
        case .ignored:
            return "The request was ignored because another request of its scope was in flight (ignoreCurrent policy)."
        case .timedOut(let deadline, let attempts):
            return
                "The request did not finish within its deadline of \(deadline) s (\(attempts) attempt\(attempts == 1 ? "" : "s"))."
        case .transport(let error as URLError):
            return
                "The request failed to reach the server: \(error.localizedDescription) (URLError \(error.code.rawValue))."
        case .transport(let error):
            return "The request failed to reach the server: \(error.localizedDescription)"
        case .invalidRequest(let reason, let error):
            return "The request is invalid: \(reason)" + (error.map { " (\($0))" } ?? "")
        case .unacceptableStatus(let response, let message):
            let reason = HTTPStatusText.phrase(for: response.statusCode)
            return "The server answered \(response.statusCode) (\(reason))" + (message.map { ": \($0)" } ?? ".")
        case .decoding(let error, let response):
            let detail = (error as? DecodingError).map(Self.describe) ?? "\(error)"
            return
                "The response (status \(response.statusCode), \(response.body.count) bytes) could not be decoded: \(detail)"
        case .rejected(let error, let response):
            return "The response (status \(response.statusCode)) was rejected: \(error)"
        case .responseTooLarge(let limit):
            return "The response body was larger than the limit of \(limit) bytes; the transfer was stopped."
        case .authenticationFailed(let error):
            return "The server refused the credential and it could not be refreshed: \(error)"
        case .lineFull(let maxLength):
            return "The request was not sent: \(maxLength) requests were already waiting in its line, its limit."
        case .circuitOpen(let origin, let closesIn):
            return
                "The request was not sent: the circuit of \(origin) is open after repeated failures (a probe in \(closesIn) s)."
        case .waitedTooLong(let maxWait):
            return "The request was not sent: it waited in its line for \(maxWait) s, its limit, without starting."
        case .durableStore(let reason, let error?):
            return "The durable task was not kept on disk: \(reason) (\(error))."
        case .durableStore(let reason, nil):
            return "The durable task was not kept on disk: \(reason)."
        }
    }
}

extension APIError {
    /// "at data.items[0].name: expected Int, found a string" style text for a decoding error.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            guard !keys.isEmpty else { return "the top level" }
            var text = ""
            for key in keys {
                if let index = key.intValue, key.stringValue == String(index) || key.stringValue.hasPrefix("Index ") {
                    text += "[\(index)]"
                } else {
                    text += (text.isEmpty ? "" : ".") + key.stringValue
                }
            }
            return text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "at \(path(context.codingPath)): the key \"\(key.stringValue)\" is missing"
        case .valueNotFound(let type, let context):
            return
                "at \(path(context.codingPath)): expected \(type), found null or nothing (\(context.debugDescription))"
        case .typeMismatch(let type, let context):
            return "at \(path(context.codingPath)): expected \(type) (\(context.debugDescription))"
        case .dataCorrupted(let context):
            return "at \(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
