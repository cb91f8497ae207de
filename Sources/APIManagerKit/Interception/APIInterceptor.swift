import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A step every attempt of an engine goes through: an ``APIRequestAdapter`` adapts the
/// `URLRequest` before the attempt is sent (a fresh token, a signature, a header read from the
/// keychain), an ``APIResponseInspector`` sees the raw response before it is validated (to refuse
/// it, or to ask for another attempt). A type may be both; conform to the one you need, as each
/// costs an `async` call per attempt, and a response is only awaited when an inspector wants it.
///
/// Give interceptors to the engine, in order: `APIEngine(interceptors: [Signer(), Logger()])`.
/// Requests pass through the adapters in that order after the request is built (the manager's
/// `urlRequest(for:)`, persisted and default headers, the credential of an ``APIAuthentication``);
/// responses pass through the inspectors in the same order before the manager's
/// `response(for:from:)`. A type that conforms to neither is kept but never called.
///
/// Both methods are called once per attempt (a replay after a credential refresh included), never
/// while a lock of the engine is held, in a Swift task of the attempt's own, on the executor the
/// engine's ``APIEngine/Execution`` says: with `.inline` on the thread that starts the attempt (and, after
/// a suspension, on the thread that resumes it); with `.queue` on the engine's work queue.
/// Cancelling the task while an interceptor runs ends the task at once, with one terminal event,
/// and cancels that Swift task; whatever the interceptor returns afterwards is ignored.
public protocol APIInterceptor: Sendable {}

/// An interceptor that adapts the request of every attempt (see ``APIInterceptor``).
public protocol APIRequestAdapter: APIInterceptor {
    /// The request to send for this attempt.
    ///
    /// An error thrown here fails the attempt with ``APIError/invalidRequest(reason:underlying:)``
    /// (an `APIError` is passed through as it is); the manager's retry decision then applies as
    /// for any failure.
    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest
}

/// An interceptor that sees the response of every attempt before it is validated (see
/// ``APIInterceptor``).
public protocol APIResponseInspector: APIInterceptor {
    /// What to do with the attempt's response.
    ///
    /// Called for every response, whatever its status (a `401` that the engine's
    /// ``APIAuthentication`` then answers with a refresh included), and not for a transport
    /// failure. For such a refusal, `.proceed` lets the authentication take it over; `.retry` or a
    /// throw decides instead. An error thrown here fails the attempt with it (an `APIError` as it is, anything else as
    /// ``APIError/rejected(underlying:response:)``); the manager's retry decision then applies as for
    /// any failure.
    func inspect(_ response: APIRawResponse, to request: URLRequest, for attempt: APIAttempt) async throws
        -> APIResponseDisposition
}

/// The attempt an interceptor works on.
public struct APIAttempt: Sendable {
    /// The task the attempt belongs to.
    public let task: AnyAPITask
    /// The attempt's number: 1 for the first, as in ``AnyAPITask/attemptCount``.
    public let number: Int
    /// Whether this is the attempt sent again after a credential refresh (see
    /// ``APIAuthentication``); a replay keeps its attempt's number.
    public let isReplay: Bool
}

/// What an interceptor decides about a response.
public enum APIResponseDisposition: Sendable, Hashable {
    /// Go on: the response is validated and built by the manager.
    case proceed
    /// Send the request again after `delay` seconds, under the usual rules of a retry: it counts as
    /// an attempt (the next one's number is one higher, which the interceptor can use to stop
    /// asking), the delegate is told ``APIManager/task(_:willRetryAfter:error:)`` with
    /// ``APIError/rejected(underlying:response:)`` carrying ``APIRetryRequested``, the request's
    /// deadline still bounds the task, and cancelling it ends it. A negative delay counts as `0`; a
    /// delay that is not finite ends the task with that error instead.
    case retry(after: TimeInterval)
}

/// The error an attempt fails with when an interceptor asked for another one
/// (``APIResponseDisposition/retry(after:)``).
public struct APIRetryRequested: Error, Sendable, Hashable, CustomStringConvertible {
    /// The delay the interceptor asked for.
    public let delay: TimeInterval

    public var description: String { "an interceptor asked for another attempt after \(delay) s" }
}
