import Foundation

/// The engine's part of a task, kept in its handle (``AnyAPITask/bag``) where users cannot reach
/// it: what the task read from its request when it was sent, and the locked state that keeps its
/// record. It never changes after the task is made; the scheduling machine's record of the task,
/// which does, sits beside it (``AnyAPITask/record``), as does the weak reference to its engine
/// the handle cancels through (a weak reference would make the bag a value Swift copies to read).
///
/// A `let` of the handle rather than an object of its own (AsyncHTTPClient's `RequestBag` is one),
/// both measured in `SendCost` (instructions a request): a second object per task costs 311 (27,882
/// → 28,193, 1.1 %), over the 1 % a change of the hall may cost; and the record kept in the bag
/// makes the bag a `var`, which Swift copies whole to read a computed setting through it (1,800,
/// 6.5 %). Who may touch what is the point: the handle reads through the bag (its state through
/// the machine, inside the engine's locked state), the engine and its stages read the settings,
/// and only the machine reads and writes the record (`Scripts/check-machine-state.py`).
///
/// A new setting a task reads from its request goes into ``Settings`` (and its `init(of:…)`) and
/// here, or into ``Extras`` when only some tasks have it.
struct TaskBag {
    // MARK: What the task read from its request when it was sent (never changes)

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
    /// The request's ``APIRequest/deadline``, read when it is sent.
    let deadline: TimeInterval?
    /// How the task uses the cache, read from the request when it is sent.
    let cacheSettings: CacheSettings
    /// Header names that carry this request's credentials beyond the standard ones (a custom auth
    /// header): redacted, and dropped on a redirect to another origin.
    let sensitiveHeaders: Set<String>
    /// The request's ``APIRequest/maxResponseBodySize``, read when it is sent.
    let maxResponseBodySize: Int?
    /// What only some tasks carry, kept apart so that a plain task does not pay their bytes: `nil`
    /// when the task has none of them.
    let extras: Extras?

    // MARK: The lock that keeps its record

    /// What keeps ``record`` safe: the locked state of the engine that owns the task (kept here,
    /// strongly, so that a task read after its engine is gone still reads under it), or a state of the
    /// task's own when it has no engine (tests of the machine alone).
    let recordKeeper: LockedState<APIEngine.State>

    init(settings: borrowing Settings, recordKeeper: LockedState<APIEngine.State>) {
        self.lineLimit = settings.lineLimit
        self.concurrencyLimit = max(1, settings.concurrencyLimit)
        self.sharing = settings.sharing
        self.concurrencyGroup = settings.group
        self.pacing = settings.pacing
        self.deadline = settings.deadline
        self.cacheSettings = settings.cacheSettings
        self.sensitiveHeaders = settings.sensitiveHeaders
        self.maxResponseBodySize = settings.maxResponseBodySize
        self.extras = settings.extras
        self.recordKeeper = recordKeeper
    }

    // MARK: The extras
    // Inlined: a getter called on `task.bag` that is not takes the bag as its value, retaining its
    // references (measured: 467 more instructions a request without the attribute).

    /// The request's ``APIRequest/totalTimeout``, read when it is sent (clamped, unchecked).
    @inline(__always) var totalTimeout: TimeInterval? { extras?.totalTimeout }
    /// The idempotency header every attempt carries (see ``APIRequest/idempotencyKey``), made when
    /// the task was sent; `nil` for none.
    @inline(__always) var idempotencyHeader: IdempotencyHeader? { extras?.idempotencyHeader }
    /// The origins this task's credentials may go to (a page reached through a link); `nil` for
    /// any. Sent elsewhere, the request goes without them, as after a redirect.
    @inline(__always) var credentialOrigins: [Origin]? { extras?.credentialOrigins }
    /// The progress sequences of a task whose request reports progress; `nil` for the others.
    @inline(__always) var progressStreams: ProgressStreams? { extras?.progressStreams }
    /// The request's ``APIRequest/download``, read when it is sent.
    @inline(__always) var download: APIDownload? { extras?.download }
    /// Where the body goes as it arrives, for a task sent by ``APIManager/bytes(for:)`` and its
    /// siblings; `nil` for the others.
    @inline(__always) var bodyStream: StreamBuffer? { extras?.bodyStream }
    /// Headers every attempt carries besides the request's (a reconnected event stream's
    /// `Last-Event-ID`); `nil` for none.
    @inline(__always) var addedHeaders: [String: String]? { extras?.addedHeaders }
    /// A durable task's record (``APIConcurrencyPolicy/durable``); `nil` for the others.
    @inline(__always) var durableSlot: DurableSlot? { extras?.durableSlot }
    /// How long the task waits for the network, at least 0 (``APIRequest/connectivityWait``); `nil`
    /// when it does not.
    @inline(__always) var connectivityWait: Double? { extras?.connectivityWait }

    /// The request set the idempotency header itself (in `urlRequest(for:)` or `configure(_:)`): that
    /// value, read from its first built request, is the one on the wire and the one the task reports.
    @inline(__always) func recordOwnIdempotencyKey(_ value: String) {
        extras?.ownIdempotencyKey?.withLock { $0 = value }
    }
}

extension TaskBag {
    /// How the task uses the cache, read from the request when it is sent.
    struct CacheSettings {
        var option: APIResponseCache.Option
        var shouldSave: Bool
        var partition: String?
        var storesAuthenticated: Bool
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

    /// The settings only some tasks have, in one box (see ``TaskBag/extras``).
    final class Extras: Sendable {
        let totalTimeout: TimeInterval?
        let idempotencyHeader: IdempotencyHeader?
        /// The value of the idempotency header on the wire, when the request set the header itself:
        /// read from its first built request. Only a task with an idempotency key has one.
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
}

extension TaskBag.Settings {
    /// What a task of `request` keeps of it; settings only some policies use are read only for them.
    /// `record`: the durable record the task is restored from, whose idempotency key it sends.
    init<Request: APIRequest>(
        of request: Request, policy: APIConcurrencyPolicy, credentialOrigins: [Origin]?, bodyStream: StreamBuffer?,
        addedHeaders: [String: String]?, restoring record: DurableRecord?, durableSlot: DurableSlot?
    ) {
        self.init(
            policy: policy, scope: request.concurrencyScope, priority: request.priority,
            lineLimit: policy.mayWaitInLine || policy.isPaced ? request.lineLimit : nil,
            concurrencyLimit: policy.readsConcurrencyLimit ? request.concurrencyLimit : 4,
            pacing: policy.isPaced ? APIConcurrencyPolicy.Pacing(of: request) : APIConcurrencyPolicy.Pacing(),
            sharing: request.sharing, group: request.concurrencyGroup, deadline: request.deadline,
            cacheSettings: TaskBag.CacheSettings(
                option: request.cacheOption, shouldSave: request.shouldSaveInCache, partition: request.cachePartition,
                storesAuthenticated: request.cachesAuthenticatedResponses),
            sensitiveHeaders: request.authorization.map { [$0.header.name] } ?? [],
            maxResponseBodySize: request.maxResponseBodySize,
            extras: TaskBag.Extras.make(
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
