import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The scheduler a manager owns: it applies concurrency policies, runs attempts on the transport,
/// schedules retries and deadlines on the clock, and delivers events to the manager in order.
///
/// Each manager stores one engine (`let engine = APIEngine()`); give each manager its own. All its
/// state sits behind one lock, which is never held while calling a transport, a clock, a hook of the
/// manager or a delegate. When the engine is released (with its manager), every task still in flight
/// ends as cancelled with reason ``APIError/CancellationReason/managerReleased``: its transport request
/// and timers are cancelled and async callers resume, but no delegate event is sent, as there is no
/// manager left to send it.
public final class APIEngine: @unchecked Sendable {
    // @unchecked: every `var` below is read and written only while holding `lock`. The `let`s are
    // Sendable or never mutated.

    /// The transport attempts are sent with.
    public let transport: any APITransport
    /// The clock retries and deadlines are timed with.
    public let clock: any APIClock
    /// Where retry jitter comes from.
    public let randomSource: any APIRandomSource
    /// The response cache requests read and fill through ``APIRequest/cacheOption``; `nil` for none.
    public let cache: APIResponseCache?
    /// The auth headers captured from responses and sent back; `nil` for none.
    public let persistedHeaders: APIPersistedHeaders?
    /// Where attempts are built and responses decoded (see ``APIExecution``).
    public let execution: APIExecution
    /// Whether cache files are written after their task ends (on a work queue) rather than before.
    var writesBehind: Bool {
        if case .queue = execution { return true }
        return false
    }

    let lock = Lock()

    private var delivery: APIDelivery
    private var monitor: (@Sendable (APIEvent) -> Void)?
    private weak var delegateObject: AnyObject?
    private var nextIdentifier: UInt64 = 0
    private var nextSequence: UInt64 = 0
    private let defaultScope = ScopeState(key: nil)
    private var namedScopes: [String: ScopeState] = [:]
    var outbox: [(AnyAPITask, AnyAPITask.Event)] = []
    /// An empty buffer with capacity, kept for the next batch (see `deliverEvents`).
    var spareOutbox: [(AnyAPITask, AnyAPITask.Event)] = []
    var isDeliveryScheduled = false

    /// - Parameters:
    ///   - transport: ``URLSessionTransport/shared`` unless given.
    ///   - clock: a ``DispatchClock`` unless given.
    ///   - randomSource: the system's generator unless given.
    ///   - delivery: `.queue(.main)` unless given.
    ///   - execution: a concurrent queue of the engine's own (``APIExecution/concurrent(label:)``)
    ///     unless given; `.inline` for tests on a virtual clock.
    ///   - cache: none unless given; ``APIResponseCache/shared`` is a memory and disk cache.
    ///   - persistedHeaders: none unless given (see ``APIPersistedHeaders``).
    public init(
        transport: any APITransport = URLSessionTransport.shared,
        clock: any APIClock = DispatchClock(),
        randomSource: any APIRandomSource = SystemRandomSource(),
        delivery: APIDelivery = .queue(.main),
        execution: APIExecution = .concurrent(),
        cache: APIResponseCache? = nil,
        persistedHeaders: APIPersistedHeaders? = nil
    ) {
        self.transport = transport
        self.clock = clock
        self.randomSource = randomSource
        self.execution = execution
        self.delivery = delivery
        self.cache = cache
        self.persistedHeaders = persistedHeaders
    }

    deinit {
        var effects = Effects()
        lock.lock()
        for task in allInFlightTasks() {
            end(
                task, with: .failure(.cancelled(reason: .managerReleased)), effects: &effects, pump: false,
                notify: false)
        }
        lock.unlock()
        effects.performCancellationsAndCompletions()
    }

    // MARK: Settings

    /// Where events are delivered; settable at any time, affecting events produced afterwards.
    public var eventDelivery: APIDelivery {
        get { lock.withLock { delivery } }
        set { lock.withLock { delivery = newValue } }
    }

    /// Told about every network attempt as it starts and ends, with timings (see ``APIEvent``);
    /// `nil` unless set. Called on the thread that starts or completes the attempt, without any lock
    /// held: keep it fast, and do not block in it.
    public var eventMonitor: (@Sendable (APIEvent) -> Void)? {
        get { lock.withLock { monitor } }
        set { lock.withLock { monitor = newValue } }
    }

    /// The delegate, held weakly. Set it through ``APIManager/delegate``.
    var delegate: AnyObject? {
        get { lock.withLock { delegateObject } }
        set { lock.withLock { delegateObject = newValue } }
    }

    /// The number of tasks in flight: waiting, running or waiting for a retry.
    public var inFlightCount: Int {
        lock.withLock {
            namedScopes.values.reduce(count(of: defaultScope)) { $0 + count(of: $1) }
        }
    }

    private func count(of scope: ScopeState) -> Int {
        scope.started.count + scope.startedFromLine.count + scope.line.count
    }

    func makeIdentifier() -> UInt64 {
        lock.withLock {
            nextIdentifier += 1
            return nextIdentifier
        }
    }

    // MARK: Submitting

    /// Applies the task's policy: starts it, queues it, ignores it, or (if it was cancelled before
    /// being submitted) ends it. `observer`, if given, is told what the async API needs (a cached
    /// copy, the end); it is registered before anything can happen to the task, so it never misses
    /// the end.
    func submit(_ task: AnyAPITask, observed: Bool = false) {
        var effects = Effects()
        lock.lock()
        guard task.phase == .created else {
            lock.unlock()
            return
        }
        task.isObserved = observed
        nextSequence += 1
        task.sequence = nextSequence
        if let reason = task.cancellationBeforeSubmit {
            task.phase = .waiting
            end(task, with: .failure(.cancelled(reason: reason)), effects: &effects)
        } else {
            let scope = scope(for: task.concurrencyScope)
            task.scope = scope
            task.phase = .waiting
            switch task.concurrencyPolicy {
            case .default:
                startDirectly(task, in: scope, effects: &effects)
            case .cancelOthers:
                for other in scope.started.snapshot() + scope.startedFromLine.snapshot() + scope.line.snapshot() {
                    end(other, with: .failure(.cancelled(reason: .policy)), effects: &effects, pump: false)
                }
                // Ending the last task of a named scope closed it; the new task opens it again, so
                // the scope it runs in is the one later tasks of the same key find.
                let reopened = self.scope(for: task.concurrencyScope)
                task.scope = reopened
                startDirectly(task, in: reopened, effects: &effects)
            case .waitUntilDone:
                if scope.isIdle {
                    startDirectly(task, in: scope, effects: &effects)
                } else {
                    scope.line.append(task, as: .line)
                    emit(.waiting, for: task, effects: &effects)
                }
            case .waitUntilDoneHighPriority:
                if scope.hasRunning {
                    scope.line.prepend(task, as: .line)
                    emit(.waiting, for: task, effects: &effects)
                } else {
                    startDirectly(task, in: scope, effects: &effects)
                }
            case .ignoreCurrent:
                if scope.isIdle {
                    startDirectly(task, in: scope, effects: &effects)
                } else {
                    end(task, with: .failure(.ignored), effects: &effects)
                }
            }
            if let deadline = task.deadline, task.phase != .ended {
                effects.deadlines.append((task, deadline))
            }
        }
        lock.unlock()
        perform(effects)
    }

    // MARK: Cancelling

    func cancel(_ task: AnyAPITask, reason: APIError.CancellationReason) {
        var effects = Effects()
        lock.lock()
        switch task.phase {
        case .created:
            if task.cancellationBeforeSubmit == nil { task.cancellationBeforeSubmit = reason }
        case .ended:
            break
        case .waiting, .running, .waitingForRetry:
            end(task, with: .failure(.cancelled(reason: reason)), effects: &effects)
        }
        lock.unlock()
        perform(effects)
    }

    /// Cancels every in-flight task for which `shouldCancel` returns `true`. The predicate runs
    /// without the lock, on this thread.
    func cancelTasks(reason: APIError.CancellationReason, where shouldCancel: (AnyAPITask) throws -> Bool) rethrows {
        let candidates = lock.withLock { allInFlightTasks() }
        let chosen = try candidates.filter(shouldCancel)
        guard !chosen.isEmpty else { return }
        var effects = Effects()
        lock.lock()
        // End every chosen task before any line moves on: a waiting task that is itself being
        // cancelled must never start (and be sent) because a task ahead of it ended first.
        var touched: [ObjectIdentifier: ScopeState] = [:]
        for task in chosen where task.phase != .ended {
            if let scope = task.scope { touched[ObjectIdentifier(scope)] = scope }
            end(task, with: .failure(.cancelled(reason: reason)), effects: &effects, pump: false)
        }
        for scope in touched.values.sorted(by: { ($0.key ?? "") < ($1.key ?? "") }) {
            pump(scope, effects: &effects)
        }
        lock.unlock()
        perform(effects)
    }

    /// The in-flight tasks: per scope, the running ones, then the line from head to tail.
    func inFlightTasks() -> [AnyAPITask] {
        lock.withLock { allInFlightTasks() }
    }

    private func allInFlightTasks() -> [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        for scope in [defaultScope] + Array(namedScopes.values) {
            tasks += scope.started.snapshot()
            tasks += scope.startedFromLine.snapshot()
            tasks += scope.line.snapshot()
        }
        return tasks
    }

    /// Cancelled, ignored, timed-out and decoding failures never retry, whatever the hook says.
    static func mayRetry(_ error: APIError) -> Bool {
        switch error {
        case .cancelled, .ignored, .timedOut, .decoding, .responseTooLarge: return false
        case .transport, .invalidRequest, .unacceptableStatus, .rejected: return true
        }
    }

    func retryTimerFired(_ task: AnyAPITask, attempt: Int) {
        var effects = Effects()
        lock.lock()
        if task.phase == .waitingForRetry, task.attemptNumber == attempt {
            task.retryTimer = nil
            beginAttempt(task, effects: &effects)
        }
        lock.unlock()
        perform(effects)
    }

    func deadlineFired(_ task: AnyAPITask, deadline: TimeInterval) {
        var effects = Effects()
        lock.lock()
        if task.phase != .ended {
            task.deadlineTimer = nil
            let attempts = task.attemptNumber
            end(task, with: .failure(.timedOut(deadline: deadline, attempts: attempts)), effects: &effects)
        }
        lock.unlock()
        perform(effects)
    }

    // MARK: Transitions (called with the lock held)

    private func scope(for key: String?) -> ScopeState {
        guard let key else { return defaultScope }
        if let scope = namedScopes[key] { return scope }
        let scope = ScopeState(key: key)
        namedScopes[key] = scope
        return scope
    }

    private func startDirectly(_ task: AnyAPITask, in scope: ScopeState, effects: inout Effects) {
        scope.started.append(task, as: .started)
        beginAttempt(task, effects: &effects)
    }

    func beginAttempt(_ task: AnyAPITask, effects: inout Effects) {
        task.attemptNumber += 1
        task.phase = .running
        task.attemptProgress = .starting
        emit(.started(attempt: task.attemptNumber), for: task, effects: &effects)
        effects.starts.append((self, task, task.attemptNumber))
    }

    /// Starts the head of the line while it may start.
    private func pump(_ scope: ScopeState, effects: inout Effects) {
        while let head = scope.line.head, scope.canStart(head) {
            scope.line.remove(head)
            scope.startedFromLine.append(head, as: .startedFromLine)
            beginAttempt(head, effects: &effects)
        }
    }

    func end(
        _ task: AnyAPITask, with outcome: Result<AnyAPITask.BuiltResponse, APIError>,
        source: APIResponseSource? = nil,
        effects: inout Effects, pump shouldPump: Bool = true, notify: Bool = true
    ) {
        guard task.phase != .ended else { return }
        if case .success = outcome { task.source = source ?? .network }
        switch task.attemptProgress {
        case .sent(let handle):
            effects.cancellations.append(handle)
            task.attemptProgress = .idle
        case .starting:
            task.attemptProgress = .abandoned
        case .idle, .abandoned:
            break
        }
        if let timer = task.retryTimer {
            effects.cancellations.append(timer)
            task.retryTimer = nil
        }
        if let timer = task.deadlineTimer {
            effects.cancellations.append(timer)
            task.deadlineTimer = nil
        }
        task.phase = .ended
        if case .failure(let error) = outcome { task.failure = error }
        if notify {
            switch outcome {
            case .success(let response): emit(.finished(response), for: task, effects: &effects)
            case .failure(let error): emit(.failed(error), for: task, effects: &effects)
            }
        }
        if task.isObserved {
            task.isObserved = false
            effects.observations.append((task, .ended(outcome, task.source)))
        }
        // Leave the scope after the terminal event, so the task that takes its place starts after it.
        if let scope = task.scope {
            switch task.membership {
            case .started: scope.started.remove(task)
            case .startedFromLine: scope.startedFromLine.remove(task)
            case .line: scope.line.remove(task)
            case .none: break
            }
            task.scope = nil
            if shouldPump { pump(scope, effects: &effects) }
            // A named scope exists exactly as long as it has a task in flight.
            if let key = scope.key, scope.isIdle, namedScopes[key] === scope { namedScopes[key] = nil }
        }
    }

    func emit(_ event: AnyAPITask.Event, for task: AnyAPITask, effects: inout Effects) {
        outbox.append((task, event))
        if !isDeliveryScheduled {
            isDeliveryScheduled = true
            effects.delivery = delivery
        }
    }
}
