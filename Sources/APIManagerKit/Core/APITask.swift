import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The handle ``APIManager/send(_:)`` returns for one request: its identity, progress and a way to
/// cancel it. Read its properties from any thread.
///
/// `AnyAPITask` is the part that does not depend on the request type; a manager's tasks are
/// ``APITask``s of its `Request` type.
public class AnyAPITask: @unchecked Sendable, Hashable, CustomStringConvertible {
    // @unchecked: every `var` below is read and written only while holding `lock`, the lock of the
    // engine that owns the task; `let`s never change, and `engine` is a weak reference, which is
    // thread-safe.

    /// The lifecycle of a task as seen from outside.
    public enum State: Sendable, CustomStringConvertible {
        /// Queued behind other tasks of its scope (``APIConcurrencyPolicy/waitUntilDone`` and
        /// ``APIConcurrencyPolicy/waitUntilDoneHighPriority``), or not yet handed to the engine.
        case waiting
        /// An attempt is on the wire.
        case running
        /// An attempt failed and the next one is scheduled.
        case waitingForRetry
        /// Ended with a response.
        case finished
        /// Ended without a response: cancelled, ignored, timed out or failed.
        case failed(APIError)

        /// Whether the task has ended and will never change again.
        public var isTerminal: Bool {
            switch self {
            case .finished, .failed: return true
            case .waiting, .running, .waitingForRetry: return false
            }
        }

        public var description: String {
            switch self {
            case .waiting: return "waiting"
            case .running: return "running"
            case .waitingForRetry: return "waitingForRetry"
            case .finished: return "finished"
            case .failed(let error): return "failed(\(error))"
            }
        }
    }

    /// Identifies the task among all tasks of its manager; increases with each send.
    public let identifier: UInt64
    /// The request's policy, as it was when the task was sent.
    public let concurrencyPolicy: APIConcurrencyPolicy
    /// The request's scope key, as it was when the task was sent.
    public let concurrencyScope: String?

    let lock: Lock
    weak var engine: APIEngine?
    let deadline: TimeInterval?

    // MARK: State guarded by `lock`

    var phase: Phase = .created
    /// The order in which the engine accepted the task; set once, in `APIEngine.submit`.
    var sequence: UInt64 = 0
    /// The scope the task is listed in while in flight.
    var scope: ScopeState?
    /// The number of the current (or last) attempt; 0 before the first.
    var attemptNumber = 0
    var attemptProgress: AttemptProgress = .idle
    var retryTimer: (any APICancellable)?
    var deadlineTimer: (any APICancellable)?
    /// The async steps of the task's attempts that did not finish at once (interceptors, a wait
    /// for a credential refresh): cancelled when the task ends. Cancelling one that already
    /// finished does nothing, so steps that finished are not taken out one by one.
    var pendingWork: [any APICancellable] = []
    /// Whether the task was already sent again after its credential was refused (at most once).
    var hasReplayed = false
    var cancellationBeforeSubmit: APIError.CancellationReason?
    /// Whether an async caller waits for this task (its typed observer lives in the typed task).
    var isObserved = false
    /// The error the task ended with; `nil` while in flight and once it finished with a response.
    /// The response itself is not kept: a task the caller holds after it ended does not keep its
    /// response (and its body) alive.
    var failure: APIError?
    var source: APIResponseSource?
    // Intrusive list links: a task is in at most one list of its scope at a time.
    var membership: Membership = .none
    var previous: AnyAPITask?
    var next: AnyAPITask?

    enum Phase { case created, waiting, running, waitingForRetry, ended }
    /// What an observer (the async API) is told: a cached copy, then the end.
    enum Observation {
        case cached(BuiltResponse)
        case ended(Result<BuiltResponse, APIError>, APIResponseSource?)
    }
    /// A typed response on its way to the manager and to the async caller. The engine carries it
    /// without knowing its type; it hands itself over (the typed task made it, and only the typed
    /// task knows what it holds), so the response keeps its type end to end, with no cast.
    struct BuiltResponse: Sendable {
        enum Destination {
            case managerCachedCopy, managerFinished, observerCachedCopy
            case observerEnded(APIResponseSource?)
        }
        let handOver: @Sendable (Destination) -> Void
    }
    /// How the task uses the cache, read from the request when it is sent.
    struct CacheSettings {
        var option: APICacheOption
        var shouldSave: Bool
        var partition: String?
        var storesAuthenticated: Bool
    }
    let cacheSettings: CacheSettings
    /// Header names that carry this request's credentials beyond the standard ones (a custom auth
    /// header): redacted, and dropped on a redirect to another origin.
    let sensitiveHeaders: Set<String>
    /// The request's ``APIRequest/maxResponseBodySize``, read when it is sent.
    let maxResponseBodySize: Int?
    /// The idempotency header every attempt carries (see ``APIRequest/idempotencyKey``), made when
    /// the task was sent; `nil` for none.
    let idempotencyHeader: (name: String, value: String)?
    /// The origins this task's credentials may go to (a page reached through a link); `nil` for
    /// any. Sent elsewhere, the request goes without them, as after a redirect.
    let credentialOrigins: [Origin]?

    /// The value of this task's idempotency header (see ``APIRequest/idempotencyKey``), the same on
    /// every attempt; `nil` when the request declares none.
    public var idempotencyKey: String? { idempotencyHeader?.value }
    enum Membership { case none, started, startedFromLine, line }
    enum AttemptProgress {
        case idle
        /// The engine is building the request or calling the transport.
        case starting
        /// The transport has the request.
        case sent(any APICancellable)
        /// Ended while the transport call was being made: the handle is to be cancelled when it arrives.
        case abandoned
    }

    init(
        identifier: UInt64, policy: APIConcurrencyPolicy, scope: String?, deadline: TimeInterval?,
        cacheSettings: CacheSettings, sensitiveHeaders: Set<String>, maxResponseBodySize: Int?, engine: APIEngine?,
        idempotencyHeader: (name: String, value: String)? = nil, credentialOrigins: [Origin]? = nil,
        lock: Lock? = nil
    ) {
        self.identifier = identifier
        self.credentialOrigins = credentialOrigins
        self.idempotencyHeader = idempotencyHeader
        self.maxResponseBodySize = maxResponseBodySize
        self.sensitiveHeaders = sensitiveHeaders
        self.cacheSettings = cacheSettings
        self.concurrencyPolicy = policy
        self.concurrencyScope = scope
        self.deadline = deadline
        self.engine = engine
        self.lock = engine?.lock ?? lock ?? Lock()
    }

    /// A task record without an engine or a request, for tests of the scheduling machine alone.
    convenience init(identifier: UInt64, policy: APIConcurrencyPolicy, scope: String? = nil) {
        self.init(
            identifier: identifier, policy: policy, scope: scope, deadline: nil,
            cacheSettings: CacheSettings(
                option: .networkOnly, shouldSave: false, partition: nil, storesAuthenticated: false),
            sensitiveHeaders: [], maxResponseBodySize: nil, engine: nil)
    }

    /// The current state.
    public var state: State {
        lock.withLock {
            switch phase {
            case .created, .waiting: return .waiting
            case .running: return .running
            case .waitingForRetry: return .waitingForRetry
            case .ended:
                if let failure { return .failed(failure) }
                return .finished
            }
        }
    }

    /// Where the response that ended the task came from; `nil` until it finishes with one.
    public var responseSource: APIResponseSource? { lock.withLock { source } }

    /// How many attempts have started: 0 while waiting, 1 during the first attempt, and so on.
    public var attemptCount: Int { lock.withLock { attemptNumber } }

    /// Cancels the task. A task that has not ended fails with ``APIError/cancelled(reason:)``
    /// (reason `.explicit`) at once, its transport request and any retry timer are cancelled, and
    /// it never retries. Cancelling an ended task does nothing.
    public func cancel() {
        cancel(reason: .explicit)
    }

    func cancel(reason: APIError.CancellationReason) {
        if let engine {
            engine.cancel(self, reason: reason)
        } else {
            // The engine is gone, and with it every task it owned has already ended.
            lock.withLock {
                if phase == .created { cancellationBeforeSubmit = reason }
            }
        }
    }

    // MARK: Hooks the typed subclass fills in (called without the lock)

    func makeURLRequest() throws(APIError) -> URLRequest {
        throw .invalidRequest(reason: "task has no manager")
    }

    func buildResponse(_ raw: APIRawResponse) -> Result<BuiltResponse, APIError> {
        .failure(.invalidRequest(reason: "task has no manager"))
    }

    /// Tells the async caller, if any, that the task failed.
    func observerFailed(_ error: APIError) {}

    func retryDelay(afterAttempt attempt: Int, error: APIError) -> TimeInterval? { nil }

    func deliver(_ event: Event) {}

    enum Event {
        case waiting
        case started(attempt: Int)
        case willRetry(delay: TimeInterval, error: APIError)
        case cachedResponse(BuiltResponse)
        case finished(BuiltResponse)
        case failed(APIError)
    }

    // MARK: Hashable, CustomStringConvertible

    public static func == (lhs: AnyAPITask, rhs: AnyAPITask) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String {
        "APITask #\(identifier) (\(concurrencyPolicy)\(concurrencyScope.map { ", scope \($0)" } ?? "")): \(state)"
    }
}

/// A task of a manager whose requests are of type `Request`.
public class APITask<Request: APIRequest>: AnyAPITask, @unchecked Sendable {
    // @unchecked: adds only an immutable `let` to AnyAPITask.

    /// The request this task sends.
    public let request: Request

    init(request: Request, identifier: UInt64, engine: APIEngine, credentialOrigins: [Origin]? = nil) {
        self.request = request
        super.init(
            identifier: identifier, policy: request.concurrencyPolicy, scope: request.concurrencyScope,
            deadline: request.deadline,
            cacheSettings: CacheSettings(
                option: request.cacheOption, shouldSave: request.shouldSaveInCache, partition: request.cachePartition,
                storesAuthenticated: request.cachesAuthenticatedResponses),
            sensitiveHeaders: request.authorization.map { [$0.header.name] } ?? [],
            maxResponseBodySize: request.maxResponseBodySize, engine: engine,
            idempotencyHeader: request.idempotencyKey.map { ($0.headerName, $0.generate()) },
            credentialOrigins: credentialOrigins)
    }
}
