import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Ties an endpoint family together: its request type, its response type, its delegate, and the
/// engine that schedules its tasks.
///
/// ```swift
/// final class CartAPI: APIManager {
///     typealias Request = CartRequest
///     typealias Response = CartResponse
///     let engine = APIEngine()
/// }
/// ```
///
/// Every method below has a default implementation; implement one in your class to customize it.
/// The hooks (`urlRequest`, `response`, `retryDelay`) run on the thread that started the attempt or
/// received the response, without any lock held; the forwarding methods run on ``APIManager/delivery``.
///
/// Delegate events: a screen on the main actor is a delegate through an isolated conformance
/// and hears every event there with the default delivery, the main queue (see "A screen on the
/// main actor" in <doc:DelegateAndAsync>).
///
/// A manager released with tasks in flight (its engine with it) cancels them with
/// ``APIError/CancellationReason/managerReleased`` and tells its delegate nothing (the engine's
/// observers are told each task's end): keep the manager alive while its tasks matter.
public protocol APIManager: AnyObject, Sendable {
    /// The request type of this endpoint family.
    associatedtype Request: APIRequest
    /// The typed result of a successful task.
    associatedtype Response: APIResponse
    /// The delegate type: ``APIManagerDelegate`` or a protocol refining it, as an existential
    /// (`any CartAPIDelegate`). It must be class-bound: the delegate is held weakly. A manager that
    /// names its own forwards the two terminal events to it itself (``task(_:didFinishWith:)`` and
    /// ``task(_:didFailWith:)``); the defaults are then deprecated, so that a missing or misspelled
    /// forwarding method is a compiler warning.
    associatedtype Delegate = any APIManagerDelegate

    /// The engine that holds this manager's scheduling state: usually one per manager,
    /// `let engine = APIEngine()`; managers sharing one share its policy scopes (see ``APIEngine``).
    var engine: APIEngine { get }

    /// Builds the `URLRequest` for an attempt. Defaults to ``APIRequest/makeURLRequest()``, plus an
    /// `Accept` header from ``APIResponse/acceptedContentType`` unless the request names one.
    /// An error thrown here fails the attempt with ``APIError/invalidRequest(reason:underlying:)``
    /// (an `APIError` is passed through as it is).
    func urlRequest(for task: APITask<Request>) throws -> URLRequest

    /// Builds the typed response. Defaults to checking the status against
    /// ``APIRequest/acceptableStatusCodes`` (``APIError/unacceptableStatus(_:message:)`` with
    /// ``errorMessage(in:)`` otherwise), then `Response(from:)`.
    func response(for task: APITask<Request>, from raw: APIRawResponse) throws -> Response

    /// The server's explanation in a response whose status is unacceptable, for the error's
    /// message. Defaults to ``APIRawResponse/ServerMessage/find(in:keys:)``.
    func errorMessage(in response: APIRawResponse) -> String?

    /// The delay before retrying after attempt `attempt` failed with `error`, or `nil` to give up.
    /// Defaults to the request's ``APIRequest/retryPolicy`` (no retry when it is `nil`). Never asked
    /// for cancelled, ignored, timed-out, decoding, too-large or authentication failures.
    func retryDelay(for task: APITask<Request>, afterAttempt attempt: Int, error: APIError) -> TimeInterval?

    /// The task is queued behind others. Defaults to forwarding to the delegate.
    func taskIsWaiting(_ task: APITask<Request>)
    /// The task waits for the network (``APIRequest/connectivityWait``), each time it begins such a
    /// wait. Defaults to forwarding to the delegate.
    func taskIsWaitingForNetwork(_ task: APITask<Request>)
    /// Attempt `attempt` started. Defaults to forwarding to the delegate.
    func task(_ task: APITask<Request>, didStartAttempt attempt: Int)
    /// The attempt's upload or download went on (``APIRequest/reportsProgress``). Defaults to
    /// forwarding to the delegate.
    func task(_ task: APITask<Request>, didReport progress: APITransferProgress)
    /// A retry is scheduled. Defaults to forwarding to the delegate.
    func task(_ task: APITask<Request>, willRetryAfter delay: TimeInterval, error: APIError)
    /// A stored response was delivered ahead of the network's (``APIResponseCache/Option/both``); the task goes
    /// on. Defaults to forwarding to the delegate.
    func task(_ task: APITask<Request>, didReceiveCachedResponse response: Response)
    /// The task finished with a response (terminal); ``AnyAPITask/responseSource`` says where it came
    /// from. Defaults to forwarding to the delegate.
    func task(_ task: APITask<Request>, didFinishWith response: Response)
    /// The task failed, was cancelled, ignored or timed out (terminal). Defaults to forwarding to the
    /// delegate.
    func task(_ task: APITask<Request>, didFailWith error: APIError)
}
