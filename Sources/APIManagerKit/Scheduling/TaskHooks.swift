import Foundation

/// The vocabulary of a task's typed hooks (``AnyAPITask/deliver(_:)``,
/// ``AnyAPITask/buildResponse(_:)``): the events a manager is told, and a typed response the
/// engine carries without knowing its type.
extension AnyAPITask {
    /// What the manager's delegate and the call's closure are told, in order, on the delivery queue.
    enum Event {
        case waiting
        /// It waits for the network, each time it begins such a wait (the delegate's
        /// `taskIsWaitingForNetwork`; its `taskIsWaiting` is told at most once, before anything else).
        case waitingForNetwork
        case started(attempt: Int)
        case progress(APITransferProgress)
        case willRetry(delay: TimeInterval, error: APIError)
        case cachedResponse(BuiltResponse)
        case finished(BuiltResponse)
        case failed(APIError)
    }

    /// What an observer (the async API) is told: a cached copy, then the end.
    enum Observation {
        case cached(BuiltResponse)
        case ended(Result<BuiltResponse, APIError>, APIResponseCache.Source?)
    }

    /// A typed response on its way to the manager and to the async caller. The engine carries it
    /// without knowing its type; it hands itself over (the typed task made it, and only the typed
    /// task knows what it holds), so the response keeps its type end to end, with no cast.
    struct BuiltResponse: Sendable {
        enum Destination {
            case managerCachedCopy, managerFinished, observerCachedCopy
            case observerEnded(APIResponseCache.Source?)
        }
        let handOver: @Sendable (Destination) -> Void
    }
}
