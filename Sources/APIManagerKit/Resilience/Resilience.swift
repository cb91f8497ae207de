import Foundation

/// The circuit breakers and retry budgets of one engine, per origin, as a value the engine keeps in
/// its locked state. Its events take the engine's clock (`now`) and say what changed; it never
/// calls out, so tests drive it alone.
struct Resilience {
    let breaker: APIEngine.CircuitBreaker?
    let budget: APIEngine.RetryBudget?
    private var origins: [String: OriginState] = [:]

    init(breaker: APIEngine.CircuitBreaker?, budget: APIEngine.RetryBudget?) {
        self.breaker = breaker
        self.budget = budget
    }

    /// An origin's circuit and its recent requests and retries.
    private struct OriginState {
        var circuit = Circuit.closed(failures: 0)
        /// When first attempts and allowed retries were sent, oldest first (budget only).
        var requests: [Double] = []
        var retries: [Double] = []
    }

    enum Circuit: Equatable {
        case closed(failures: Int)
        case open(until: Double)
        /// One probe is out; `since` lets a probe whose outcome never came (its task was cancelled)
        /// be replaced after another open interval.
        case halfOpen(probe: UInt64, since: Double)
    }

    /// Whether an attempt may be sent.
    enum Admission: Equatable {
        case admitted
        /// The probe of a half-open circuit.
        case probe
        /// Refused: the circuit is open, and closes (lets a probe through) in `closesIn` seconds.
        case refused(closesIn: Double)
    }

    /// What an outcome changed.
    enum Change: Equatable {
        case opened(closesIn: Double)
        case closed
    }

    /// The circuit state of `origin` (tests).
    func circuit(of origin: String) -> Circuit { origins[origin]?.circuit ?? .closed(failures: 0) }

    /// An attempt of task `task` to `origin` is about to be sent. A first attempt counts as a request
    /// for the budget.
    mutating func admit(origin: String, task: UInt64, isFirstAttempt: Bool, now: Double) -> Admission {
        var state = origins[origin] ?? OriginState()
        defer { origins[origin] = state }
        var admission = Admission.admitted
        if let breaker {
            switch state.circuit {
            case .closed:
                break
            case .open(let until) where now < until:
                return .refused(closesIn: until - now)
            case .open:
                state.circuit = .halfOpen(probe: task, since: now)
                admission = .probe
            case .halfOpen(let probe, let since):
                if probe == task {
                    admission = .probe  // the probe's own replay or retry
                } else if now >= since + breaker.openInterval {
                    state.circuit = .halfOpen(probe: task, since: now)  // the probe's outcome never came
                    admission = .probe
                } else {
                    return .refused(closesIn: 0)
                }
            }
        }
        if budget != nil, isFirstAttempt {
            prune(&state, now: now)
            state.requests.append(now)
        }
        return admission
    }

    /// The outcome of an attempt of task `task` to `origin` that was sent: a transient failure or
    /// not.
    mutating func record(origin: String, task: UInt64, transientFailure: Bool, now: Double) -> Change? {
        guard let breaker, var state = origins[origin] else { return nil }
        defer { origins[origin] = state }
        switch (state.circuit, transientFailure) {
        case (.closed(let failures), true):
            if failures + 1 >= breaker.failureThreshold {
                state.circuit = .open(until: now + breaker.openInterval)
                return .opened(closesIn: breaker.openInterval)
            }
            state.circuit = .closed(failures: failures + 1)
        case (.closed, false):
            state.circuit = .closed(failures: 0)
        case (.halfOpen(let probe, _), true) where probe == task:
            state.circuit = .open(until: now + breaker.openInterval)
            return .opened(closesIn: breaker.openInterval)
        case (.halfOpen(let probe, _), false) where probe == task:
            state.circuit = .closed(failures: 0)
            return .closed
        case (.halfOpen, _), (.open, _):
            break  // an attempt sent before the circuit opened: its outcome changes nothing
        }
        return nil
    }

    /// An attempt of task `task` to `origin` that was sent ended without an outcome: it was cancelled
    /// (its task was cancelled, or ended by its deadline), which says nothing of the origin. The
    /// failure count stays as it was; a probe's cancellation lets the next attempt probe at once
    /// (``APIEngine/CircuitBreaker``: the circuit neither closes on it nor refuses for another interval).
    mutating func abandon(origin: String, task: UInt64, now: Double) {
        guard breaker != nil, var state = origins[origin] else { return }
        defer { origins[origin] = state }
        if case .halfOpen(let probe, _) = state.circuit, probe == task { state.circuit = .open(until: now) }
    }

    /// Whether an attempt that was sent ended without an outcome: the transfer was cancelled (by the
    /// engine: a cancelled task, a deadline, a newer request), not refused by the origin.
    static func isAbandoned(_ error: APIError) -> Bool {
        switch error {
        case .cancelled: return true
        case .transport(let underlying): return (underlying as? URLError)?.code == .cancelled
        default: return false
        }
    }

    /// Whether a retry to `origin` fits the budget; an allowed one is counted.
    mutating func allowsRetry(origin: String, now: Double) -> Bool {
        guard let budget else { return true }
        var state = origins[origin] ?? OriginState()
        defer { origins[origin] = state }
        prune(&state, now: now)
        let allowed = max(Double(budget.minimumRetries), budget.ratio * Double(state.requests.count))
        guard Double(state.retries.count) < allowed else { return false }
        state.retries.append(now)
        return true
    }

    private func prune(_ state: inout OriginState, now: Double) {
        guard let budget else { return }
        let oldest = now - budget.window
        if let first = state.requests.firstIndex(where: { $0 > oldest }) {
            state.requests.removeFirst(first)
        } else {
            state.requests.removeAll()
        }
        if let first = state.retries.firstIndex(where: { $0 > oldest }) {
            state.retries.removeFirst(first)
        } else {
            state.retries.removeAll()
        }
    }

    /// The origin of a URL as a key: scheme, host and port.
    static func origin(of url: URL?) -> String {
        guard let origin = Origin(url) else { return "" }
        return "\(origin.scheme)://\(origin.host):\(origin.port.map(String.init) ?? "")"
    }

    /// Whether a failure counts against the circuit: the kinds ``APIRetryPolicy`` retries by default.
    static func isTransient(_ error: APIError) -> Bool {
        transientRule.isRetryable(error, method: .get)
    }

    private static let transientRule = APIRetryPolicy()
}
