import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The scheduler a manager owns: it applies concurrency policies, runs attempts on the transport,
/// schedules retries and deadlines on the clock, and delivers events to the manager in order.
///
/// Each manager stores one engine (`let engine = APIEngine()`). Several managers may share one: they
/// then share its transport, cache, settings and policy scopes (a policy applies among all the
/// engine's tasks of a scope), while each manager's ``APIManager/cancelAll()``,
/// ``APIManager/inFlightTasks`` and ``APIManager/delegate`` stay its own. All its state sits behind
/// one lock, which is never held while calling a transport, a clock, a hook of the
/// manager or a delegate. When the engine is released (with its manager), every task still in flight
/// ends as cancelled with reason ``APIError/CancellationReason/managerReleased``: its transport request
/// and timers are cancelled and async callers resume, but no delegate event is sent, as there is no
/// manager left to send it.
public final class APIEngine: @unchecked Sendable {
    // @unchecked: what changes is in `state`, behind its lock (the engine's tasks read their records
    // inside it: it is their `recordKeeper`). The `let`s are Sendable or never mutated.

    /// What the engine was made with: its public settings read it (``configuration`` gives it
    /// back with the delivery as it is now).
    let settings: Configuration
    /// The transport's ``APITransport/acceptsBodyWriters``, read once.
    let acceptsBodyWriters: Bool
    /// Whether the engine has a circuit breaker or a retry budget: read for every attempt, so kept
    /// as one flag.
    let hasResilience: Bool
    /// What fails every request when a default header could inject lines into a request; `nil`
    /// when they are sound: checked once, when the engine is made, not for every request.
    let defaultHeadersRefusal: APIError?
    /// The interceptors that adapt requests, in order.
    let adapters: [any APIRequestAdapter]
    /// The interceptors that inspect responses, in order.
    let inspectors: [any APIResponseInspector]
    /// Runs interceptors and refreshes where ``execution`` says.
    let asyncWork: AsyncWork
    /// The network attempts identical requests share (see ``APIConcurrencyPolicy/Sharing``).
    let sharedFlights = SharedFlights()
    /// Whether cache files are written after their task ends (on a work queue) rather than before.
    var writesBehind: Bool {
        if case .inline = execution { return false }
        return true
    }

    /// Everything that changes, behind one lock; no user code (transport, clock, hook, delegate) is
    /// called while it is held. The engine's tasks keep their scheduling records in it (see
    /// ``AnyAPITask/recordKeeper``).
    let state: LockedState<State>

    struct State {
        /// The scheduling rules and their state, the circuit breakers and retry budgets included
        /// (see ``SchedulingMachine``).
        var machine: SchedulingMachine
        var delivery: APIEngine.Delivery
        /// Whom each attempt tells what happens to it: the engine's observers, then the forward
        /// ``eventMonitor`` installed, if set; read once when an attempt begins
        /// (``startAttempt(_:attempt:link:)``).
        var attemptObservers: [any APIEngine.Observer] = []
        var secretNames: Set<String> = []
        /// Each manager's delegate, by manager (usually one): weak both ways.
        var delegateSlots: [DelegateSlot] = []
        /// Whether events wait on a delivery queue nobody runs.
        var deliveryWatch = DeliveryWatch()
        /// The observable models something holds (``APIEngine/Activity``, ``AnyAPITask/Status``),
        /// fed after each event of the machine; empty unless an app asked for one.
        var modelFeeds: [ModelFeed] = []
        /// A hop to the main queue that sets the models' figures is on its way.
        var activityRefreshIsQueued = false
    }

    /// - Parameters:
    ///   - transport: ``URLSessionTransport/shared`` unless given.
    ///   - clock: a ``DispatchClock`` unless given.
    ///   - randomSource: the system's generator unless given.
    ///   - delivery: `.queue(.main)` unless given.
    ///   - execution: the serial lanes every engine of the process shares (``APIEngine/Execution/shared``,
    ///     one per processor) unless given; ``APIEngine/Execution/concurrent(label:)`` for lanes of the
    ///     engine's own; `.inline` for tests on a virtual clock.
    ///   - cache: none unless given; ``APIResponseCache/shared`` is a memory and disk cache.
    ///   - persistedHeaders: none unless given (see ``APIAuthentication/PersistedHeaders``).
    ///   - interceptors: none unless given (see ``APIInterceptor``).
    ///   - authentication: none unless given (see ``APIAuthentication``).
    ///   - defaultHeaders: ``APIEngine/DefaultHeaders/standard`` (`User-Agent`, `Accept-Language`) unless
    ///     given; ``APIEngine/DefaultHeaders/none`` for none.
    ///   - cookies: none unless given: no cookie is stored or sent (see ``APICookieStore``).
    ///   - circuitBreaker: none unless given (see ``APIEngine/CircuitBreaker``).
    ///   - retryBudget: none unless given (see ``APIEngine/RetryBudget``).
    public convenience init(
        transport: any APITransport = URLSessionTransport.shared,
        clock: any APIClock = DispatchClock(),
        randomSource: any APIRetryPolicy.RandomSource = APIRetryPolicy.SystemRandomSource(),
        delivery: APIEngine.Delivery = .queue(.main),
        execution: APIEngine.Execution = .shared,
        cache: APIResponseCache? = nil,
        persistedHeaders: APIAuthentication.PersistedHeaders? = nil,
        interceptors: [any APIInterceptor] = [],
        authentication: APIAuthentication? = nil,
        defaultHeaders: APIEngine.DefaultHeaders = .standard,
        cookies: APICookieStore? = nil,
        circuitBreaker: APIEngine.CircuitBreaker? = nil,
        retryBudget: APIEngine.RetryBudget? = nil
    ) {
        self.init(
            configuration: Configuration(
                transport: transport, clock: clock, randomSource: randomSource, delivery: delivery,
                execution: execution, cache: cache, persistedHeaders: persistedHeaders, interceptors: interceptors,
                authentication: authentication, defaultHeaders: defaultHeaders, cookies: cookies,
                circuitBreaker: circuitBreaker, retryBudget: retryBudget, observers: []))
    }

    /// Makes an engine from one value (see ``Configuration``).
    public init(configuration: Configuration) {
        self.settings = configuration
        self.adapters = configuration.interceptors.compactMap { $0 as? any APIRequestAdapter }
        self.inspectors = configuration.interceptors.compactMap { $0 as? any APIResponseInspector }
        self.asyncWork = AsyncWork(execution: configuration.execution)
        self.acceptsBodyWriters = configuration.transport.acceptsBodyWriters
        self.hasResilience = configuration.circuitBreaker != nil || configuration.retryBudget != nil
        self.defaultHeadersRefusal = BuildRequestStage.refusal(of: configuration.defaultHeaders)
        self.state = LockedState(
            State(
                machine: SchedulingMachine(
                    circuitBreaker: configuration.circuitBreaker, retryBudget: configuration.retryBudget),
                delivery: configuration.delivery, attemptObservers: configuration.observers
            ))
        configuration.connectivity?.start { [weak self] isReachable in
            self?.connectivityChanged(isReachable: isReachable)
        }
        if let authentication = configuration.authentication, !configuration.observers.isEmpty {
            authentication.addSignOutListener(self)
        }
    }

    deinit {
        let observed = !observers.isEmpty
        let (actions, ended, kept) = state.withLock { state in
            let ended = state.machine.inFlightTasks
            let actions = state.machine.release()
            // A task that outlives its engine keeps this state (its record is read inside it), so
            // nothing the engine kept stays in it: not the events no delivery run took (their tasks),
            // the monitor (the app's closure) or the delegates. What it kept is let go after the lock
            // (`kept`): a task released there may call its completion, the app's code.
            var kept = State(machine: SchedulingMachine(), delivery: .inline)
            swap(&state, &kept)
            return (actions, ended, kept)
        }
        defer { withExtendedLifetime(kept) {} }
        // No delivery and no new starts: only cancellations, async callers, and the group slots
        // its tasks held, for other engines' tasks.
        actions.performCancellationsAndObservations()
        for task in actions.grants { SchedulingMachine.Actions.grant(task) }
        // No delegate is told (there is no manager left), but the observers see every task end:
        // a tracer's spans end, a metric's active requests go down.
        // A call's completion is told too (the delegate's events are not: no delivery is made).
        let error = APIError.cancelled(reason: .managerReleased)
        for task in ended {
            if observed { tellObservers(.ended(.failure(error)), of: task) }
            task.endedWithoutDelivery(error)
        }
    }

    // MARK: Settings

    /// Where events are delivered; settable at any time, affecting events produced afterwards.
    /// (The same name as the initializer's `delivery:` and ``Configuration/delivery``.)
    public var delivery: APIEngine.Delivery {
        get { state.withLock { $0.delivery } }
        set { state.withLock { $0.delivery = newValue } }
    }

    /// The name of ``delivery`` before 1.0.
    @available(*, deprecated, renamed: "delivery")
    public var eventDelivery: APIEngine.Delivery {
        get { delivery }
        set { delivery = newValue }
    }

    /// Told about every network attempt as it starts and ends, with timings (see ``APIEvent``);
    /// `nil` unless set. Called on the thread that starts or completes the attempt, without any lock
    /// held: keep it fast, and do not block in it.
    ///
    /// A shorthand for an observer (``Observer``): setting it installs one, after the engine's
    /// ``observers``, that turns what it is told of each attempt into ``APIEvent``s; attempts that
    /// begin afterwards tell it. ``Configuration/observers`` says more (the task's waits, retries
    /// and end) with typed values.
    public var eventMonitor: (@Sendable (APIEvent) -> Void)? {
        get { state.withLock { ($0.attemptObservers.last as? EventMonitorForward)?.monitor } }
        set {
            let forward = newValue.map(EventMonitorForward.init(monitor:))
            state.withLock { $0.attemptObservers = forward.map { observers + [$0] } ?? observers }
        }
    }

    /// Names of headers, query items and body fields that hold secrets beyond the standard rule of
    /// ``APISecrets`` (`["X-Tenant-Pin", "otp"]`); empty unless set. Settable at any time, for
    /// attempts built afterwards: their values are redacted in events and cURL descriptions, such
    /// headers are dropped on a redirect or a followed link to another origin, and a request
    /// carrying one is cached in its own partition, like a credential.
    public var secretNames: Set<String> {
        get { state.withLock { $0.secretNames } }
        set { state.withLock { $0.secretNames = newValue } }
    }

    /// Starts `attempt` in the machine, which keeps its `link` as the task's handle to end it by
    /// (``SchedulingMachine/attemptStarted(_:attempt:handle:)``), and reads the settings it is to be
    /// built with, its observers (the event monitor's forward among them) and the secret names:
    /// under the lock once. `counted` is `nil` when it is no longer the task's current attempt.
    func startAttempt(
        _ task: AnyAPITask, attempt: Int, link: LockedAttemptLink
    ) -> (counted: Int?, observers: [any APIEngine.Observer], secretNames: Set<String>) {
        state.withLock {
            ($0.machine.attemptStarted(task, attempt: attempt, handle: link), $0.attemptObservers, $0.secretNames)
        }
    }

    /// A manager and its delegate, both held weakly: the delegate as the manager's own `Delegate`
    /// type (a ``TypedDelegate``, read back without a conformance lookup) and as an
    /// ``APIManagerDelegate``, for the forwarding defaults, looked up once when it is set (a lookup
    /// per delivered event would cost about 400 instructions, three times per task).
    struct DelegateSlot {
        weak var manager: AnyObject?
        let typed: AnyObject
        weak var base: (any APIManagerDelegate)?
    }

    /// The delegate of `manager` as it was set (through ``APIManager/delegate``), a
    /// `TypedDelegate<Manager.Delegate>`; each manager sharing this engine has its own.
    func typedDelegate(of manager: AnyObject) -> AnyObject? {
        state.withLock { state in
            // By index: copying a slot would copy its weak references.
            for index in state.delegateSlots.indices where state.delegateSlots[index].manager === manager {
                return state.delegateSlots[index].typed
            }
            return nil
        }
    }

    /// The delegate of `manager` as an ``APIManagerDelegate``, for the delegate hooks every manager
    /// has; `nil` when it has none or it does not conform.
    func baseDelegate(of manager: AnyObject) -> (any APIManagerDelegate)? {
        state.withLock { state in
            for index in state.delegateSlots.indices where state.delegateSlots[index].manager === manager {
                return state.delegateSlots[index].base
            }
            return nil
        }
    }

    /// Sets `manager`'s delegate (`typed`, a `TypedDelegate`), or removes it when `nil`. (A value that
    /// makes no `TypedDelegate` is not an object, so it has no base either.)
    func setDelegate(typed: AnyObject?, base: (any APIManagerDelegate)?, of manager: AnyObject) {
        state.withLock { state in
            state.delegateSlots.removeAll { $0.manager == nil || $0.manager === manager }
            if let typed {
                state.delegateSlots.append(DelegateSlot(manager: manager, typed: typed, base: base))
            }
        }
    }

    /// The number of tasks in flight: waiting, running or waiting for a retry.
    public var inFlightCount: Int {
        state.withLock { $0.machine.inFlightCount }
    }

    // MARK: Events

    /// Runs one event of the scheduling machine under the lock, then performs the actions it
    /// returned, and returns them (an attempt's driver reads there whether its attempt may go to the
    /// transport, ``SchedulingMachine/Actions/send``, or be replayed). `attempt`: the attempt the
    /// event was about, whose event monitor is told the machine's reports.
    @discardableResult
    func transition(
        reportingTo attempt: Attempt? = nil, _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions
    ) -> SchedulingMachine.Actions {
        var modelsLive = false
        let (actions, run) = decide(event, modelsLive: &modelsLive)
        perform(actions, delivery: run, reportingTo: attempt)
        // An observable model may show what changed (a task that waits silently for the network).
        if modelsLive { activityMayHaveChanged() }
        return actions
    }

    /// Runs one event of the scheduling machine under the lock and returns what to perform, and
    /// the delivery run to schedule, for a caller that performs it itself, after the lock is released.
    func decide(
        _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions
    ) -> (SchedulingMachine.Actions, DeliveryRun?) {
        var modelsLive = false
        return decide(event, modelsLive: &modelsLive)
    }

    /// ``decide(_:)``, saying whether observable models are live (read in the same take of the lock).
    private func decide(
        _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions, modelsLive: inout Bool
    ) -> (SchedulingMachine.Actions, DeliveryRun?) {
        state.withLock { state in
            modelsLive = !state.modelFeeds.isEmpty
            let actions = event(&state.machine)
            guard actions.deliverEvents else { return (actions, nil) }
            let watched: Bool
            if case .queue = state.delivery {
                watched = state.deliveryWatch.arm(takes: state.machine.outbox.takes)
            } else {
                watched = false
            }
            return (actions, DeliveryRun(delivery: state.delivery, setsWatch: watched))
        }
    }

    /// ``transition(reportingTo:_:)`` for the event that sends `task`: the engine's observers are told
    /// it was sent first (``tellSent(_:)``).
    func transition(sending task: AnyAPITask, _ event: (inout SchedulingMachine) -> SchedulingMachine.Actions) {
        tellSent(task)
        transition(event)
    }

    /// Tells the engine's observers, if it has any, that `task` is sent: the machine gives it its
    /// identifier first, and the task joins its line only after the observers return, so no other
    /// thread (a cancel, a policy, the delivery of another task's events) sees it before. Told once:
    /// a task already identified is not told again.
    func tellSent(_ task: AnyAPITask) {
        guard !observers.isEmpty else { return }
        if state.withLock({ $0.machine.identify(task) }) { tellObservers(.sent, of: task) }
    }

    /// Applies the task's policy: starts it, queues it, ignores it, or (if it was cancelled before
    /// being submitted) ends it. `observed` says an async caller waits for it; its observer is
    /// registered before, so it never misses the end.
    func submit(_ task: AnyAPITask, observed: Bool = false) {
        if task.concurrencyPolicy == .durable { return submitDurably(task, observed: observed) }
        let now = task.concurrencyPolicy.readsClockWhenSent ? clock.now : 0
        transition(sending: task) { $0.send(task, observed: observed, now: now) }
    }

    func cancel(_ task: AnyAPITask, reason: APIError.CancellationReason) {
        transition { $0.cancel(task, reason: reason) }
    }

    /// Cancels every in-flight task for which `shouldCancel` returns `true`. The predicate runs
    /// without the lock, on this thread.
    func cancelTasks(reason: APIError.CancellationReason, where shouldCancel: (AnyAPITask) throws -> Bool) rethrows {
        let candidates = state.withLock { $0.machine.inFlightTasks }
        let chosen = try candidates.filter(shouldCancel)
        guard !chosen.isEmpty else { return }
        transition { $0.cancel(tasks: chosen, reason: reason) }
    }

    /// The in-flight tasks: per scope, the running ones, then the line from head to tail.
    func inFlightTasks() -> [AnyAPITask] {
        state.withLock { $0.machine.inFlightTasks }
    }

    /// Cancelled, ignored, timed-out, decoding, too-large and authentication failures never retry,
    /// whatever the hook says.
    static func mayRetry(_ error: APIError) -> Bool {
        switch error {
        case .cancelled, .ignored, .timedOut, .decoding, .responseTooLarge, .authenticationFailed, .lineFull,
            .waitedTooLong, .circuitOpen, .durableStore:
            return false
        case .transport, .invalidRequest, .unacceptableStatus, .rejected: return true
        }
    }

    func progressReported(_ task: AnyAPITask, attempt: Int, progress: APITransferProgress) {
        transition { $0.progressReported(task, attempt: attempt, progress: progress) }
    }

    func retryTimerFired(_ task: AnyAPITask, attempt: Int) {
        retrierLeft(task, retries: true)
        transition { $0.retryTimerFired(task, attempt: attempt) }
    }

    func quietEnded(_ task: AnyAPITask) {
        transition { $0.quietEnded(task) }
    }

    func throttleTurnCame(for scope: String?) {
        let now = clock.now
        transition { $0.throttleTurnCame(for: scope, now: now) }
    }

    func waitLimitFired(_ task: AnyAPITask, maxWait: TimeInterval) {
        transition { $0.waitLimitFired(task, maxWait: maxWait) }
    }

    func deadlineFired(_ task: AnyAPITask, deadline: TimeInterval) {
        transition { $0.deadlineFired(task, deadline: deadline) }
    }
}
