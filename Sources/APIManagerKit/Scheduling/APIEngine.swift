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
    func submit(_ task: AnyAPITask, observer: (@Sendable (AnyAPITask.Observation) -> Void)? = nil) {
        var effects = Effects()
        lock.lock()
        guard task.phase == .created else {
            lock.unlock()
            return
        }
        task.observer = observer
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

    // MARK: Attempts

    /// Builds the request and hands it to the transport (after consulting the cache). Called without
    /// the lock, through the trampoline.
    func performStart(_ task: AnyAPITask, attempt: Int) {
        let monitor = eventMonitor
        var urlRequest: URLRequest
        var sensitiveHeaders = task.sensitiveHeaders
        do throws(APIError) {
            urlRequest = try task.makeURLRequest()
            if let persistedHeaders {
                persistedHeaders.apply(to: &urlRequest)
                sensitiveHeaders.formUnion(persistedHeaders.names)
            }
            // Whatever set them (the request, `configure(_:)`, `urlRequest(for:)`), no header may
            // inject lines into the request.
            try HTTPFieldValidation.validate(urlRequest)
            let timeout = urlRequest.timeoutInterval
            guard timeout.isFinite, timeout > 0 else {
                throw APIError.invalidRequest(
                    reason: "the timeout \(timeout) is not a positive, finite number of seconds")
            }
        } catch {
            monitor?(
                APIEvent(
                    kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                    duration: nil, sensitiveHeaders: []))
            attemptCompleted(task, attempt: attempt, result: .failure(error), cache: nil)
            return
        }
        var cacheContext: CacheContext?
        if let cache {
            let lookup = CacheLookupStage.lookUp(
                cache, settings: task.cacheSettings, attempt: attempt, request: urlRequest,
                sensitiveHeaders: sensitiveHeaders, writesBehind: writesBehind)
            switch lookup {
            case .answer(let stored, let otherwise):
                if deliverCached(stored, for: task, attempt: attempt, terminal: true) { return }
                cache.remove(for: otherwise.key)  // no longer builds a response: the network answers
                cacheContext = otherwise
            case .copyFirst(let stored, var then):
                if !deliverCached(stored, for: task, attempt: attempt, terminal: false) {
                    cache.remove(for: then.key)
                    then.revalidating = nil
                }
                cacheContext = then
            case .network(let context):
                cacheContext = context
            }
            cacheContext?.addConditionalHeaders(to: &urlRequest)
        }
        // A task that ended while its request was being built is never handed to the transport.
        guard claimSend(task, attempt: attempt) else { return }
        let sent = SentAttempt(
            task: task, number: attempt, request: urlRequest, startedAt: clock.now,
            options: APITransportOptions(
                sensitiveHeaders: sensitiveHeaders, maxResponseBodySize: task.maxResponseBodySize),
            monitor: monitor, cache: cacheContext)
        monitor?(
            APIEvent(
                kind: .started, taskIdentifier: task.identifier, attempt: attempt, request: urlRequest, duration: nil,
                sensitiveHeaders: sensitiveHeaders))
        let handle = transport.send(urlRequest, options: sent.options) { [weak self] result in
            guard let self else { return }
            switch self.execution {
            case .inline:
                self.transportAnswered(sent, result: result)
            case .queue(let queue):
                // Off the transport's callback queue: responses of different tasks build in parallel.
                queue.async { self.transportAnswered(sent, result: result) }
            }
        }
        lock.lock()
        guard task.attemptNumber == attempt else {
            lock.unlock()
            return
        }
        switch task.attemptProgress {
        case .starting:
            task.attemptProgress = .sent(handle)
            lock.unlock()
        case .abandoned:
            task.attemptProgress = .idle
            lock.unlock()
            handle.cancel()
        case .idle, .sent:
            // The transport completed inside `send`.
            lock.unlock()
        }
    }

    /// One attempt handed to the transport: what its answer needs.
    struct SentAttempt: Sendable {
        let task: AnyAPITask
        let number: Int
        let request: URLRequest
        let startedAt: TimeInterval
        let options: APITransportOptions
        let monitor: (@Sendable (APIEvent) -> Void)?
        let cache: CacheContext?
    }

    /// What the transport answered, on the thread ``execution`` says.
    private func transportAnswered(_ sent: SentAttempt, result: Result<APIRawResponse, any Error>) {
        var result = result.mapError(APIError.wrapTransport)
        // For transports that do not enforce the limit themselves.
        if case .success(let raw) = result, let limit = sent.options.maxResponseBodySize, raw.body.count > limit {
            result = .failure(.responseTooLarge(limit: limit))
        }
        if case .success(let raw) = result {
            persistedHeaders?.capture(from: raw, requestURL: sent.request.url)
        }
        if let monitor = sent.monitor, isCurrent(sent.task, attempt: sent.number) {
            monitor(
                APIEvent(
                    kind: .finished(result), taskIdentifier: sent.task.identifier, attempt: sent.number,
                    request: sent.request, duration: clock.now - sent.startedAt,
                    sensitiveHeaders: sent.options.sensitiveHeaders))
        }
        attemptCompleted(sent.task, attempt: sent.number, result: result, cache: sent.cache)
    }

    private func attemptCompleted(
        _ task: AnyAPITask, attempt: Int, result: Result<APIRawResponse, APIError>, cache context: CacheContext?
    ) {
        // A cheap check first, so a late answer never runs the manager's hooks; the transition below
        // checks again under the lock, since the task may end while the hooks run.
        guard isCurrent(task, attempt: attempt) else { return }
        var outcome: Result<any Sendable, APIError>
        var source = APIResponseSource.network
        switch result {
        case .success(let raw):
            if raw.statusCode == 304, let refreshed = context?.refresh(with: raw) {
                outcome = task.buildResponse(refreshed.response)
                source = .revalidated
            } else {
                outcome = task.buildResponse(raw)
                if case .success = outcome, let context { context.store(raw) }
            }
        case .failure(let error):
            outcome = .failure(error)
        }
        var retryDelay: TimeInterval?
        if case .failure(let error) = outcome, Self.mayRetry(error),
            let delay = task.retryDelay(afterAttempt: attempt, error: error), delay.isFinite
        {
            retryDelay = max(0, delay)
        }

        var effects = Effects()
        lock.lock()
        guard task.phase == .running, task.attemptNumber == attempt else {
            lock.unlock()
            return
        }
        task.attemptProgress = .idle
        switch (outcome, retryDelay) {
        case (.failure(let error), let delay?):
            task.phase = .waitingForRetry
            emit(.willRetry(delay: delay, error: error), for: task, effects: &effects)
            if delay == 0 {
                beginAttempt(task, effects: &effects)
            } else {
                effects.retries.append((task, attempt, delay))
            }
        default:
            end(task, with: outcome, source: source, effects: &effects)
        }
        lock.unlock()
        perform(effects)
    }

    /// Delivers a cached copy ahead of the network (`terminal == false`) or as the task's end.
    /// Returns `false`, doing nothing, when the stored response no longer builds a response.
    func deliverCached(_ raw: APIRawResponse, for task: AnyAPITask, attempt: Int, terminal: Bool) -> Bool {
        let outcome = task.buildResponse(raw)
        guard case .success(let payload) = outcome else { return false }
        var effects = Effects()
        lock.lock()
        if task.phase == .running, task.attemptNumber == attempt {
            if terminal {
                task.attemptProgress = .idle
                end(task, with: outcome, source: .cache, effects: &effects)
            } else {
                emit(.cachedResponse(payload), for: task, effects: &effects)
                if let observer = task.observer { effects.observations.append((observer, .cached(payload))) }
            }
        }
        lock.unlock()
        perform(effects)
        return true
    }

    /// Whether the attempt may go to the transport: it is still the task's current one. An attempt
    /// abandoned while it was being built is settled here instead.
    private func claimSend(_ task: AnyAPITask, attempt: Int) -> Bool {
        lock.withLock {
            guard task.attemptNumber == attempt else { return false }
            if case .abandoned = task.attemptProgress {
                task.attemptProgress = .idle
                return false
            }
            return task.phase == .running
        }
    }

    func isCurrent(_ task: AnyAPITask, attempt: Int) -> Bool {
        lock.withLock { task.phase == .running && task.attemptNumber == attempt }
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

    private func beginAttempt(_ task: AnyAPITask, effects: inout Effects) {
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

    private func end(
        _ task: AnyAPITask, with outcome: Result<any Sendable, APIError>, source: APIResponseSource? = nil,
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
        if let observer = task.observer {
            task.observer = nil
            effects.observations.append((observer, .ended(outcome, task.source)))
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

    private func emit(_ event: AnyAPITask.Event, for task: AnyAPITask, effects: inout Effects) {
        outbox.append((task, event))
        if !isDeliveryScheduled {
            isDeliveryScheduled = true
            effects.delivery = delivery
        }
    }
}
