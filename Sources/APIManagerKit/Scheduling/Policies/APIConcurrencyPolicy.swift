/// How a task behaves towards the other in-flight tasks of its scope when it is sent.
///
/// A policy applies among the tasks of one ``APIEngine`` (one manager's, unless managers share an
/// engine), narrowed further by ``APIRequest/concurrencyScope``: tasks whose scopes differ never
/// interact. A task is *in flight* while it is waiting to start, running an attempt, or waiting for
/// a retry. <doc:ConcurrencyPolicies> has the full table of interactions.
///
/// A minor release may add a policy (the CHANGELOG says so when it does): a `switch` over every
/// policy ends with `@unknown default:`, as one over ``APIError`` does.
public enum APIConcurrencyPolicy: String, Sendable, Hashable, CaseIterable {
    /// Starts at once, alongside anything else.
    case `default`
    /// Ends every in-flight task of the scope as cancelled (reason ``APIError/CancellationReason/policy``),
    /// none of which retries, then starts. Search-as-you-type: only the latest query matters.
    case cancelOthers
    /// Starts only after every task sent before it in the scope has ended: FIFO, never overlapping.
    /// Cart sequences (add, update, remove) keep their order, retries included.
    case waitUntilDone
    /// Waits only for the tasks already running, then starts before every waiting task; among several
    /// such tasks the newest starts first. Detail pages: the page the user opened last loads first.
    case waitUntilDoneHighPriority
    /// If anything is in flight in the scope, ends at once as ignored (``APIError/ignored``) and is
    /// never sent. Pull-to-refresh: a second pull is ignored.
    case ignoreCurrent
    /// If anything is in flight in the scope, replaces every task of the scope still waiting (each
    /// ends as cancelled, reason ``APIError/CancellationReason/policy``, and is never sent) and waits
    /// in their place, starting as `waitUntilDone` would; otherwise starts at once. So among such
    /// tasks at most one runs and one waits. Autosave: only the newest version is sent next.
    case conflate
    /// Runs while fewer than ``APIRequest/concurrencyLimit`` tasks of the scope are running and none
    /// is waiting; otherwise waits in the line (by priority) and starts, as the line's head, as soon
    /// as fewer than that many run. A gallery: at most four downloads at once.
    case limited
    /// Waits a quiet interval (``APIRequest/debounceInterval``) before it starts; a newer `debounce`
    /// task of the scope sent during the wait replaces it (it ends as cancelled, reason
    /// ``APIError/CancellationReason/policy``, and nothing was sent for it). When the interval has
    /// passed it starts at once, alongside whatever runs: an earlier task's answer may still arrive
    /// after it. Suggestions that may overlap, a save after the last keystroke; for a search whose
    /// screen shows one answer, ``debounceLatest``.
    case debounce
    /// Starts at most once per ``APIRequest/throttleInterval`` in the scope, counted from the last
    /// `throttle` task's start; a task sent sooner waits for its turn or, if the request's
    /// ``APIRequest/throttleMode`` is ``APIConcurrencyPolicy/ThrottleMode/ignore``, ends at once as ignored. At most one
    /// refresh per interval.
    case throttle
    /// Waits and starts as ``waitUntilDone`` does (FIFO in its scope, never overlapping), and is kept
    /// on disk from the moment it is sent until it ends, so that a task the process did not see end
    /// is sent again, in order and with the same idempotency key, when the app next opens the scope
    /// (``APIEngine/DurableStore``, ``APIManager/replayDurableTasks(inScope:)``). Needs the engine's
    /// ``APIEngine/Configuration/durableStore`` and an `Encodable` and `Decodable` request (and
    /// should declare an ``APIRequest/idempotencyKey``); otherwise the task ends at once with
    /// ``APIError/durableStore(reason:underlying:)``, never sent. It waits for the network rather than
    /// fail (``APIRequest/connectivityWait``); refused for good, it ends and its store's rule drops it
    /// or stops the line (``APIEngine/DurableStore/Refusal``). A cart edited offline, sent when the
    /// app comes back.
    case durable
    /// Search-as-you-type: waits a quiet interval (``APIRequest/debounceInterval``) as ``debounce``
    /// does (a newer `debounceLatest` task of the scope sent during the wait replaces it), and when
    /// it starts, every other in-flight task of the scope ends as cancelled (reason
    /// ``APIError/CancellationReason/policy``; a running one's transport request is cancelled and its
    /// answer dropped), as ``cancelOthers`` does. So the answer delivered last is always the latest
    /// query's: a slow answer to a short query never arrives after the answer to the longer one
    /// typed since. (Combine's `debounce` then `switchToLatest`; RxSwift's `flatMapLatest`.)
    case debounceLatest
}

extension APIConcurrencyPolicy {
    /// What a ``APIConcurrencyPolicy/throttle`` task sent before its scope's next turn does.
    public enum ThrottleMode: String, Sendable, Hashable, CaseIterable {
        /// It waits for its turn, and starts then; later ones take the turns after it.
        case wait
        /// It ends at once as ignored (``APIError/ignored``) and is never sent.
        case ignore
    }
}

// What each policy reads of its request and of the engine, in one place: the scheduling machine's
// rule for a policy is one function (`Scheduling/Machine/SchedulingMachine+Policies.swift`).
extension APIConcurrencyPolicy {
    /// Whether a task may wait in its scope's line, so that its ``APIRequest/lineLimit`` is read.
    var mayWaitInLine: Bool {
        switch self {
        case .waitUntilDone, .waitUntilDoneHighPriority, .conflate, .limited, .durable: return true
        case .default, .cancelOthers, .ignoreCurrent, .debounce, .debounceLatest, .throttle: return false
        }
    }

    /// Whether a task waits quietly before it starts (a debounce, a throttle's turn), so that its
    /// line limit's `maxWait` and its ``Pacing`` are read.
    var isPaced: Bool { self == .debounce || self == .debounceLatest || self == .throttle }

    /// Whether a task reads its request's ``APIRequest/concurrencyLimit`` (only a limited one does).
    var readsConcurrencyLimit: Bool { self == .limited }

    /// Whether the machine reads the engine's clock when a task is sent (only the throttle does).
    var readsClockWhenSent: Bool { self == .throttle }

    /// A paced task's settings, read when it is sent: its debounce interval and its throttle
    /// interval (each a finite number of seconds, at least 0), and whether an early throttled task
    /// waits. Other tasks keep the defaults and read nothing. A policy added later with a setting of
    /// its own reads it here, in ``init(of:)``, so that the task's snapshot needs no change.
    struct Pacing {
        var debounceInterval: Double = 0.3
        var throttleInterval: Double = 1
        var throttleWaits = true

        init() {}

        init(debounceInterval: Double, throttleInterval: Double, throttleMode: APIConcurrencyPolicy.ThrottleMode) {
            self.debounceInterval = debounceInterval.isFinite ? max(0, debounceInterval) : 0
            self.throttleInterval = throttleInterval.isFinite ? max(0, throttleInterval) : 0
            self.throttleWaits = throttleMode == .wait
        }

        /// What a paced task (``APIConcurrencyPolicy/isPaced``) reads of `request`; other tasks keep
        /// the defaults, ``init()``, and read nothing.
        init(of request: some APIRequest) {
            self.init(
                debounceInterval: request.debounceInterval, throttleInterval: request.throttleInterval,
                throttleMode: request.throttleMode)
        }
    }
}
