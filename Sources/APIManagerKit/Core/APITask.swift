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
    // @unchecked: `record` is read and written only inside `bag.recordKeeper` (the locked state of
    // the engine that owns the task), `identifier` only before the task is handed out or inside
    // it; `let`s never change.
    //
    // The handle: what users read, and `cancel()`. The engine's part of the task is its `bag` (a
    // stored `let`, not an object of its own: see ``TaskBag``) and the machine's `record`; the
    // typed hooks are the manager's typed task's (`ManagedTask`).

    /// Identifies the task among all tasks of its engine (so of its manager); increases with each
    /// send. Given when the task is sent, before ``APIManager/send(_:)`` returns it.
    @exclusivity(unchecked) public internal(set) var identifier: UInt64
    /// The request's policy, as it was when the task was sent.
    public let concurrencyPolicy: APIConcurrencyPolicy
    /// The request's scope key, as it was when the task was sent.
    public let concurrencyScope: String?
    /// The request's ``APIRequest/priority``, as it was when the task was sent.
    public let priority: Int

    /// The engine's part of the task: what it read from its request, and the locked state that
    /// keeps its record (see ``TaskBag``). Users never reach it; the handle reads through it.
    final let bag: TaskBag
    /// The engine that runs the task, while it lives: ``cancel()`` goes through it.
    final weak let engine: APIEngine?

    /// The scheduling machine's record of this task: its lifecycle, attempt, timers and place in
    /// line. Only the machine reads and writes it (`Scheduling/Machine/`; what users read comes
    /// through its `state(of:)`, `attemptCount(of:)` and `responseSource(of:)`), inside the locked
    /// state that keeps it (``TaskBag/recordKeeper``); it sits in the task, so that the machine
    /// reaches it without a lookup.
    @exclusivity(unchecked) final var record = SchedulingRecord()

    /// A handle whose bag holds `settings`, run by `engine`; `recordKeeper` is the locked state the
    /// machine keeps its record in: the engine's, or, for a task without an engine, one of its own.
    init(
        identifier: UInt64, settings: borrowing TaskBag.Settings, engine: APIEngine?,
        recordKeeper: LockedState<APIEngine.State> = LockedState(
            APIEngine.State(machine: SchedulingMachine(), delivery: .inline))
    ) {
        self.identifier = identifier
        self.concurrencyPolicy = settings.policy
        self.concurrencyScope = settings.scope
        self.priority = settings.priority
        self.bag = TaskBag(settings: settings, recordKeeper: recordKeeper)
        self.engine = engine
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
            settings: TaskBag.Settings(
                policy: policy, scope: scope, priority: priority, lineLimit: lineLimit,
                concurrencyLimit: concurrencyLimit, pacing: pacing, group: group,
                extras: TaskBag.Extras.make(
                    totalTimeout: nil, idempotencyHeader: nil, credentialOrigins: nil, reportsProgress: false,
                    download: nil, bodyStream: nil, addedHeaders: nil, durableSlot: durableSlot)),
            engine: nil)
    }

    /// Whether this task was restored from its durable line on this launch: sent by an earlier run
    /// (or an earlier engine) that did not see it end, and sent again by
    /// ``APIManager/replayDurableTasks(inScope:)`` or by the first durable task of its scope.
    public var isRestored: Bool { bag.durableSlot?.isRestored ?? false }

    /// The value of this task's idempotency header (see ``APIRequest/idempotencyKey``), the same on
    /// every attempt; `nil` when the request declares none.
    public var idempotencyKey: String? {
        bag.extras?.ownIdempotencyKey?.withLock { $0 } ?? bag.idempotencyHeader?.value
    }

    /// The current state.
    public var state: State {
        bag.recordKeeper.withLock { $0.machine.state(of: self) }
    }

    /// Where the response that ended the task came from; `nil` until it finishes with one.
    public var responseSource: APIResponseCache.Source? {
        bag.recordKeeper.withLock { $0.machine.responseSource(of: self) }
    }

    /// The task's upload and download progress as it is reported, in the order of the delegate's
    /// events; the sequence ends when the task ends. Empty (it ends at once) for a task whose request
    /// does not report progress (``APIRequest/reportsProgress``). Each call makes a new sequence that
    /// gets the reports from then on.
    public var progress: AsyncStream<APITransferProgress> {
        guard let progressStreams = bag.progressStreams else { return AsyncStream { $0.finish() } }
        return progressStreams.makeStream()
    }

    /// How many attempts have started: 0 while waiting, 1 during the first attempt, and so on.
    public var attemptCount: Int { bag.recordKeeper.withLock { $0.machine.attemptCount(of: self) } }

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

    // MARK: The typed hooks (called without the lock)
    // What the manager's typed task (`ManagedTask`, in `Scheduling/`) does for the engine, in the
    // handle's class because a class's overridable methods are declared in its body. A task without a
    // manager (tests of the machine alone) has these defaults. Their vocabulary (`Event`,
    // `BuiltResponse`, `Observation`) is in `Scheduling/TaskHooks.swift`.

    /// Builds the request of an attempt (the manager's ``APIManager/urlRequest(for:)``).
    func makeURLRequest() throws(APIError) -> URLRequest {
        throw .invalidRequest(reason: "task has no manager")
    }

    /// Builds the typed response from the raw one (the manager's ``APIManager/response(for:from:)``).
    func buildResponse(_ raw: APIRawResponse) -> Result<BuiltResponse, APIError> {
        .failure(.invalidRequest(reason: "task has no manager"))
    }

    /// The delay before the next attempt; `nil` for none (the manager's retry hook).
    func retryDelay(afterAttempt attempt: Int, error: APIError) -> TimeInterval? { nil }

    /// Tells the manager (and so its delegate) and the call's closure; on the delivery queue.
    func deliver(_ event: Event) {}

    /// Tells the async caller, if any, that the task failed.
    func observerFailed(_ error: APIError) {}

    /// The engine ended the task and is gone: no terminal event will be delivered.
    func endedWithoutDelivery(_ error: APIError) {}

    /// Whether an observer (the async API, a replay's outcomes) was given the task before it was sent.
    var isObserved: Bool { false }

    /// The manager that sent the task, while it lives; `nil` for a task without one.
    var sender: AnyObject? { nil }

    /// The request's type and its JSON: a durable task's record (encoded by the manager's request
    /// type, the only one that knows it).
    func durableDescription() throws(APIError) -> (type: String, json: Data) {
        throw .durableStore(reason: "the task has no request to write")
    }

    /// How the records of this task's durable line are made into tasks again when its send opens the
    /// line: decoded by its manager's request type.
    var durableRestorer: DurableRestorer { .withoutManager }

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
    // The handle users hold for a manager's task: its request. What the engine keeps is in the
    // bag; the typed hooks are the manager's typed task's (`ManagedTask`).

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
            settings: TaskBag.Settings(
                of: request, policy: policy, credentialOrigins: credentialOrigins, bodyStream: bodyStream,
                addedHeaders: addedHeaders, restoring: record, durableSlot: durableSlot),
            engine: engine, recordKeeper: engine.state)
    }
}
