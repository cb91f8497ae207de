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
    // @unchecked: `record` is read and written only inside `recordKeeper` (the locked state of the
    // engine that owns the task), `identifier` only before the task is handed out or inside it;
    // `let`s never change, and `engine` is a weak reference, which is thread-safe.

    /// The lifecycle of a task as seen from outside.
    ///
    /// States compare equal with `==`, so a test writes
    /// `#expect(task.state == .failed(.cancelled(reason: .policy)))`: two failures are equal when
    /// their errors say the same (``APIError/description``: the case and what it carries, such as
    /// the cancellation's reason, the status and the server's message, or the limit that was met).
    public enum State: Sendable, Equatable, CustomStringConvertible {
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

        /// Equal when both are the same case, two failures when their errors say the same (see ``State``).
        public static func == (lhs: State, rhs: State) -> Bool {
            switch (lhs, rhs) {
            case (.waiting, .waiting), (.running, .running), (.waitingForRetry, .waitingForRetry),
                (.finished, .finished):
                return true
            case (.failed(let left), .failed(let right)):
                return left.description == right.description
            case (.waiting, _), (.running, _), (.waitingForRetry, _), (.finished, _), (.failed, _):
                return false
            }
        }

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

    /// Identifies the task among all tasks of its engine (so of its manager); increases with each
    /// send. Given when the task is sent, before ``APIManager/send(_:)`` returns it.
    @exclusivity(unchecked) public internal(set) var identifier: UInt64
    /// The request's policy, as it was when the task was sent.
    public let concurrencyPolicy: APIConcurrencyPolicy
    /// The request's scope key, as it was when the task was sent.
    public let concurrencyScope: String?
    /// The request's ``APIRequest/priority``, as it was when the task was sent.
    public let priority: Int
    /// The request's ``APIRequest/lineLimit``, read when it is sent.
    let lineLimit: APIConcurrencyPolicy.LineLimit?
    /// The request's ``APIRequest/concurrencyLimit``, at least 1, read when it is sent.
    let concurrencyLimit: Int
    /// The request's ``APIRequest/sharing``, read when it is sent.
    let sharing: APIConcurrencyPolicy.Sharing
    /// The request's ``APIRequest/concurrencyGroup``, read when it is sent.
    let concurrencyGroup: APIConcurrencyPolicy.Group?
    /// The request's pacing, read when it is sent: its debounce interval and its throttle interval
    /// (each a finite number of seconds, at least 0), and whether an early throttled task waits.
    let pacing: APIConcurrencyPolicy.Pacing

    /// What keeps ``record`` safe: the locked state of the engine that owns the task (kept here,
    /// strongly, so that a task read after its engine is gone still reads under it), or a state of the
    /// task's own when it has no engine (tests of the machine alone).
    let recordKeeper: LockedState<APIEngine.State>
    weak var engine: APIEngine?
    let deadline: TimeInterval?

    /// The scheduling machine's record of this task: its lifecycle, attempt, timers and place in
    /// line. Only the machine reads and writes it (`Scheduling/Machine/`; what users read comes
    /// through its `state(of:)`, `attemptCount(of:)` and `responseSource(of:)`), in `recordKeeper`; it
    /// sits here, in the task, so that the machine reaches it without a lookup.
    @exclusivity(unchecked) var record = SchedulingRecord()

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
    /// How the task uses the cache, read from the request when it is sent.
    struct CacheSettings {
        var option: APIResponseCache.Option
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
    /// What only some tasks carry (a total timeout, an idempotency header, credential origins,
    /// progress, a download, a body stream, added headers), kept apart so that a plain task does not
    /// pay their bytes: `nil` when the task has none of them.
    private let extras: Extras?

    /// The settings only some tasks have, in one box (see ``AnyAPITask/extras``).
    final class Extras: Sendable {
        let totalTimeout: TimeInterval?
        let idempotencyHeader: IdempotencyHeader?
        let ownIdempotencyKey: LockedState<String?>?
        let credentialOrigins: [Origin]?
        let progressStreams: ProgressStreams?
        let download: APIDownload?
        let bodyStream: StreamBuffer?
        let addedHeaders: [String: String]?
        /// A durable task's record (``APIConcurrencyPolicy/durable``); `nil` for the others.
        let durableSlot: DurableSlot?
        /// How long the task waits for the network (``APIRequest/connectivityWait``); `nil` for none.
        let connectivityWait: Double?

        /// `nil` when there is none of them (checked before anything is allocated).
        static func make(
            totalTimeout: TimeInterval?, idempotencyHeader: IdempotencyHeader?, credentialOrigins: [Origin]?,
            reportsProgress: Bool, download: APIDownload?, bodyStream: StreamBuffer?, addedHeaders: [String: String]?,
            durableSlot: DurableSlot? = nil, connectivityWait: Double? = nil
        ) -> Extras? {
            guard
                totalTimeout != nil || idempotencyHeader != nil || credentialOrigins != nil || reportsProgress
                    || download != nil || bodyStream != nil || addedHeaders != nil || durableSlot != nil
                    || connectivityWait != nil
            else { return nil }
            return Extras(
                totalTimeout: totalTimeout, idempotencyHeader: idempotencyHeader, credentialOrigins: credentialOrigins,
                reportsProgress: reportsProgress, download: download, bodyStream: bodyStream,
                addedHeaders: addedHeaders,
                durableSlot: durableSlot, connectivityWait: connectivityWait)
        }

        private init(
            totalTimeout: TimeInterval?, idempotencyHeader: IdempotencyHeader?, credentialOrigins: [Origin]?,
            reportsProgress: Bool, download: APIDownload?, bodyStream: StreamBuffer?, addedHeaders: [String: String]?,
            durableSlot: DurableSlot?, connectivityWait: Double?
        ) {
            self.totalTimeout = totalTimeout.map(APIRequestDefaults.clampedTimeout)
            self.idempotencyHeader = idempotencyHeader
            self.ownIdempotencyKey = idempotencyHeader == nil ? nil : LockedState(nil)
            self.credentialOrigins = credentialOrigins
            self.progressStreams = reportsProgress ? ProgressStreams() : nil
            self.download = download
            self.bodyStream = bodyStream
            self.addedHeaders = addedHeaders
            self.durableSlot = durableSlot
            self.connectivityWait = connectivityWait.map { $0.isNaN ? 0 : max(0, $0) }
        }
    }

    /// The request's ``APIRequest/totalTimeout``, read when it is sent (clamped, unchecked).
    var totalTimeout: TimeInterval? { extras?.totalTimeout }
    /// The idempotency header every attempt carries (see ``APIRequest/idempotencyKey``), made when
    /// the task was sent; `nil` for none.
    var idempotencyHeader: IdempotencyHeader? { extras?.idempotencyHeader }
    /// The value of the idempotency header on the wire, when the request set the header itself
    /// (in `urlRequest(for:)` or `configure(_:)`): read from its first built request. Only a task
    /// with an idempotency key has one.
    private var ownIdempotencyKey: LockedState<String?>? { extras?.ownIdempotencyKey }
    /// The origins this task's credentials may go to (a page reached through a link); `nil` for
    /// any. Sent elsewhere, the request goes without them, as after a redirect.
    var credentialOrigins: [Origin]? { extras?.credentialOrigins }
    /// The progress sequences of a task whose request reports progress; `nil` for the others.
    var progressStreams: ProgressStreams? { extras?.progressStreams }
    /// The request's ``APIRequest/download``, read when it is sent.
    var download: APIDownload? { extras?.download }
    /// Where the body goes as it arrives, for a task sent by ``APIManager/bytes(for:)`` and its
    /// siblings; `nil` for the others.
    var bodyStream: StreamBuffer? { extras?.bodyStream }
    /// Headers every attempt carries besides the request's (a reconnected event stream's
    /// `Last-Event-ID`); `nil` for none.
    var addedHeaders: [String: String]? { extras?.addedHeaders }

    /// A durable task's record (``APIConcurrencyPolicy/durable``); `nil` for the others.
    var durableSlot: DurableSlot? { extras?.durableSlot }
    /// How long the task waits for the network, at least 0 (``APIRequest/connectivityWait``); `nil`
    /// when it does not.
    var connectivityWait: Double? { extras?.connectivityWait }

    /// Whether this task was restored from its durable line on this launch: sent by an earlier run
    /// (or an earlier engine) that did not see it end, and sent again by
    /// ``APIManager/replayDurableTasks(inScope:)`` or by the first durable task of its scope.
    public var isRestored: Bool { extras?.durableSlot?.isRestored ?? false }

    /// The request's type and its JSON, for a durable task's record; only a task that knows its
    /// request (an ``APITask``) has them.
    func durableDescription() throws(APIError) -> (type: String, json: Data) {
        throw .durableStore(reason: "the task has no request to write")
    }

    /// How the records of this task's durable line are made into tasks again when its send opens the
    /// line: by its manager; only a manager's task has one.
    var durableRestorer: DurableRestorer { .withoutManager }

    /// Whether an observer (the async API, a replay's outcomes) was given the task before it was sent.
    var isObserved: Bool { false }

    /// The value of this task's idempotency header (see ``APIRequest/idempotencyKey``), the same on
    /// every attempt; `nil` when the request declares none.
    public var idempotencyKey: String? {
        ownIdempotencyKey?.withLock { $0 } ?? idempotencyHeader?.value
    }

    /// The request set the idempotency header itself: that value is the one on the wire.
    func recordOwnIdempotencyKey(_ value: String) {
        ownIdempotencyKey?.withLock { $0 = value }
    }
    /// What a task reads from its request, once, when it is sent: the task keeps these and never
    /// reads the request's settings again (a request's computed properties may change meanwhile).
    struct Settings {
        var policy: APIConcurrencyPolicy
        var scope: String?
        var priority = 0
        var lineLimit: APIConcurrencyPolicy.LineLimit?
        var concurrencyLimit = 4
        var pacing = APIConcurrencyPolicy.Pacing()
        var sharing = APIConcurrencyPolicy.Sharing.never
        var group: APIConcurrencyPolicy.Group?
        var deadline: TimeInterval?
        var cacheSettings = CacheSettings(
            option: .networkOnly, shouldSave: false, partition: nil, storesAuthenticated: false)
        var sensitiveHeaders: Set<String> = []
        var maxResponseBodySize: Int?
        /// What only some tasks carry; `nil` for none.
        var extras: Extras?
    }

    /// `recordKeeper`: the engine's locked state (see ``recordKeeper``); a state of the task's own
    /// only for a task without an engine (tests of the machine alone).
    init(
        identifier: UInt64, settings: borrowing Settings, engine: APIEngine?,
        recordKeeper: LockedState<APIEngine.State> = LockedState(
            APIEngine.State(machine: SchedulingMachine(), delivery: .inline))
    ) {
        self.identifier = identifier
        self.extras = settings.extras
        self.maxResponseBodySize = settings.maxResponseBodySize
        self.sensitiveHeaders = settings.sensitiveHeaders
        self.cacheSettings = settings.cacheSettings
        self.concurrencyPolicy = settings.policy
        self.concurrencyScope = settings.scope
        self.priority = settings.priority
        self.lineLimit = settings.lineLimit
        self.concurrencyLimit = max(1, settings.concurrencyLimit)
        self.pacing = settings.pacing
        self.sharing = settings.sharing
        self.concurrencyGroup = settings.group
        self.deadline = settings.deadline
        self.engine = engine
        self.recordKeeper = recordKeeper
    }

    /// A task record without an engine or a request, for tests of the scheduling machine alone.
    convenience init(
        identifier: UInt64, policy: APIConcurrencyPolicy, scope: String? = nil, priority: Int = 0,
        lineLimit: APIConcurrencyPolicy.LineLimit? = nil, concurrencyLimit: Int = 4,
        pacing: APIConcurrencyPolicy.Pacing = APIConcurrencyPolicy.Pacing(),
        group: APIConcurrencyPolicy.Group? = nil, durableSlot: DurableSlot? = nil
    ) {
        self.init(
            identifier: identifier,
            settings: Settings(
                policy: policy, scope: scope, priority: priority, lineLimit: lineLimit,
                concurrencyLimit: concurrencyLimit, pacing: pacing, group: group,
                extras: Extras.make(
                    totalTimeout: nil, idempotencyHeader: nil, credentialOrigins: nil, reportsProgress: false,
                    download: nil, bodyStream: nil, addedHeaders: nil, durableSlot: durableSlot)),
            engine: nil)
    }

    /// The current state.
    public var state: State {
        recordKeeper.withLockHeld { SchedulingMachine.state(of: self) }
    }

    /// Where the response that ended the task came from; `nil` until it finishes with one.
    public var responseSource: APIResponseCache.Source? {
        recordKeeper.withLockHeld { SchedulingMachine.responseSource(of: self) }
    }

    /// The task's upload and download progress as it is reported, in the order of the delegate's
    /// events; the sequence ends when the task ends. Empty (it ends at once) for a task whose request
    /// does not report progress (``APIRequest/reportsProgress``). Each call makes a new sequence that
    /// gets the reports from then on.
    public var progress: AsyncStream<APITransferProgress> {
        guard let progressStreams else { return AsyncStream { $0.finish() } }
        return progressStreams.makeStream()
    }

    /// How many attempts have started: 0 while waiting, 1 during the first attempt, and so on.
    public var attemptCount: Int { recordKeeper.withLockHeld { SchedulingMachine.attemptCount(of: self) } }

    /// Cancels the task. A task that has not ended fails with ``APIError/cancelled(reason:)``
    /// (reason `.explicit`) at once, its transport request and any retry timer are cancelled, and
    /// it never retries. Cancelling an ended task does nothing.
    public func cancel() {
        cancel(reason: .explicit)
    }

    func cancel(reason: APIError.CancellationReason) {
        // Without an engine there is nothing to cancel: it ended every task it had when it was
        // released, and a task is sent in the step that makes it, so none is left unsent.
        engine?.cancel(self, reason: reason)
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

    /// The engine ended the task and is gone: no terminal event will be delivered.
    func endedWithoutDelivery(_ error: APIError) {}

    /// The manager that sent the task, while it lives; `nil` for a task without one.
    var sender: AnyObject? { nil }

    func retryDelay(afterAttempt attempt: Int, error: APIError) -> TimeInterval? { nil }

    func deliver(_ event: Event) {}

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

    /// `restoring`: the durable record the task is restored from, whose idempotency key it sends.
    init(
        request: Request, engine: APIEngine, credentialOrigins: [Origin]? = nil, bodyStream: StreamBuffer? = nil,
        addedHeaders: [String: String]? = nil, policy: APIConcurrencyPolicy? = nil,
        restoring record: DurableRecord? = nil, retryingRefusal: Bool = false
    ) {
        self.request = request
        let policy = policy ?? request.concurrencyPolicy
        let durableSlot =
            policy == .durable
            ? DurableSlot(
                isRestored: record != nil,
                stopsTheLineWhenRefused: engine.durableStore?.refusal(for: request.concurrencyScope) == .stopTheLine,
                retriesRefusal: retryingRefusal) : nil
        super.init(
            identifier: 0,
            settings: Self.settings(
                of: request, policy: policy, credentialOrigins: credentialOrigins, bodyStream: bodyStream,
                addedHeaders: addedHeaders, restoring: record, durableSlot: durableSlot),
            engine: engine, recordKeeper: engine.state)
    }

    override func durableDescription() throws(APIError) -> (type: String, json: Data) {
        let type = String(reflecting: Request.self)
        guard let encodable = request as? any Encodable else {
            throw .durableStore(reason: "\(type) is not Encodable, so a durable task of it cannot be written")
        }
        guard Request.self is any Decodable.Type else {
            throw .durableStore(reason: "\(type) is not Decodable, so a durable task of it could not be replayed")
        }
        do {
            return (type, try JSONEncoder().encode(encodable))
        } catch {
            throw .durableStore(reason: "\(type) could not be encoded", underlying: error)
        }
    }

    /// What the task keeps of its request (see ``AnyAPITask/Settings``); settings only some
    /// policies use are read only for them.
    private static func settings(
        of request: Request, policy: APIConcurrencyPolicy, credentialOrigins: [Origin]?, bodyStream: StreamBuffer?,
        addedHeaders: [String: String]?, restoring record: DurableRecord?, durableSlot: DurableSlot?
    ) -> Settings {
        return Settings(
            policy: policy, scope: request.concurrencyScope, priority: request.priority,
            lineLimit: policy.mayWaitInLine || policy.isPaced ? request.lineLimit : nil,
            concurrencyLimit: policy.readsConcurrencyLimit ? request.concurrencyLimit : 4,
            pacing: policy.isPaced ? APIConcurrencyPolicy.Pacing(of: request) : APIConcurrencyPolicy.Pacing(),
            sharing: request.sharing, group: request.concurrencyGroup, deadline: request.deadline,
            cacheSettings: CacheSettings(
                option: request.cacheOption, shouldSave: request.shouldSaveInCache, partition: request.cachePartition,
                storesAuthenticated: request.cachesAuthenticatedResponses),
            sensitiveHeaders: request.authorization.map { [$0.header.name] } ?? [],
            maxResponseBodySize: request.maxResponseBodySize,
            extras: Extras.make(
                totalTimeout: request.totalTimeout,
                idempotencyHeader: request.idempotencyKey.map { key in
                    // A restored task sends the value its first run sent.
                    if let value = record?.idempotencyKey {
                        return IdempotencyHeader(name: key.headerName, value: value)
                    }
                    // A request that sets the header itself sends its own value: the task reports it.
                    if let own = request.headers.first(where: {
                        $0.key.caseInsensitiveCompare(key.headerName) == .orderedSame
                    })?.value {
                        return IdempotencyHeader(name: key.headerName, value: own)
                    }
                    return key.makeHeader()
                },
                credentialOrigins: credentialOrigins, reportsProgress: request.reportsProgress,
                download: bodyStream == nil ? request.download : nil, bodyStream: bodyStream,
                addedHeaders: addedHeaders,
                durableSlot: durableSlot,
                connectivityWait: request.connectivityWait ?? (policy == .durable ? .infinity : nil)))
    }
}

/// The progress sequences handed out by ``AnyAPITask/progress``: fed as the reports are delivered,
/// finished when the task's terminal event is.
final class ProgressStreams: Sendable {
    private struct State {
        var continuations: [AsyncStream<APITransferProgress>.Continuation] = []
        var ended = false
        var latest: APITransferProgress?
    }

    private let state = LockedState(State())

    /// The last report delivered; `nil` before the first.
    var latest: APITransferProgress? { state.withLock { $0.latest } }

    func makeStream() -> AsyncStream<APITransferProgress> {
        let (stream, continuation) = AsyncStream.makeStream(of: APITransferProgress.self)
        let ended = state.withLock { state -> Bool in
            if !state.ended { state.continuations.append(continuation) }
            return state.ended
        }
        if ended { continuation.finish() }
        return stream
    }

    func yield(_ progress: APITransferProgress) {
        let continuations = state.withLock { state in
            state.latest = progress
            return state.continuations
        }
        for continuation in continuations { continuation.yield(progress) }
    }

    func finish() {
        let continuations = state.withLock { state in
            state.ended = true
            defer { state.continuations = [] }
            return state.continuations
        }
        for continuation in continuations { continuation.finish() }
    }
}
