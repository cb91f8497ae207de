/// The engine's circuit breaker and retry budget (``APIEngine/CircuitBreaker``,
/// ``APIEngine/RetryBudget``) as part of the machine: its state holds them (``Resilience``, per
/// origin), the event that says an attempt's request is built admits it or ends the task with
/// ``APIError/circuitOpen(origin:closesIn:)``, and the event that says an attempt ended records its
/// outcome, spends the budget on its retry or refuses it. What the event monitor is to be told comes
/// back as actions (``Action/report(_:)``), performed by the attempt's driver after the lock.
extension SchedulingMachine {
    /// What the resilience rules need of an attempt, given with its events when the engine has a
    /// circuit breaker or a retry budget (`nil` otherwise, so that engines without them do no work
    /// for them).
    struct NetworkContext {
        /// The origin key of the attempt's request (``Resilience/origin(of:)``).
        let origin: String
        /// The engine's clock.
        let now: Double
    }

    /// What an attempt's end says beyond its outcome.
    struct AttemptEnd {
        /// Whether the attempt reached the transport: only then does its outcome count for its
        /// origin, and a failure before it is told to the event monitor (``Report/failedUnsent(_:)``).
        var sent: Bool
        /// The answer shared with the attempts of its flight: its outcome counts once, and the
        /// budget decides its retry once (its lock is a leaf, taken under the engine's).
        var sharedAnswer: SharedAnswer?
        /// Whether the attempt was on a shared flight (``SharedFlights``), which a retry's wait rests
        /// (``Action/restFlight(_:)``).
        var boardedFlight = false
        /// Whether the event monitor listens (reports are made only then).
        var isMonitored = false
        /// The resilience rules' context; `nil` without a circuit breaker or retry budget.
        var network: NetworkContext?
    }

    /// What the event monitor is told about an attempt, by the attempt's driver, after the lock.
    enum Report: Equatable, CustomStringConvertible {
        /// The attempt failed before its request reached the transport.
        case failedUnsent(APIError)
        case circuitOpened(origin: String, closesIn: Double)
        case circuitClosed(origin: String)
        /// The budget refused the retry the task would have made.
        case retryRefused(APIError)

        var kind: APIEvent.Kind {
            switch self {
            case .failedUnsent(let error): return .finished(.failure(error))
            case .circuitOpened(let origin, let closesIn): return .circuitOpened(origin: origin, closesIn: closesIn)
            case .circuitClosed(let origin): return .circuitClosed(origin: origin)
            case .retryRefused(let error): return .retryRefused(error)
            }
        }

        var description: String {
            switch self {
            case .failedUnsent(let error): return "failedUnsent(\(error))"
            case .circuitOpened(let origin, let closesIn): return "circuitOpened(\(origin), \(closesIn))"
            case .circuitClosed(let origin): return "circuitClosed(\(origin))"
            case .retryRefused(let error): return "retryRefused(\(error))"
            }
        }

        static func == (lhs: Report, rhs: Report) -> Bool { lhs.description == rhs.description }
    }

    /// The circuit's answer to an attempt about to be sent: `nil` when it may go, else the error the
    /// task ends with.
    mutating func admit(
        _ task: AnyAPITask, attempt: Int, isReplay: Bool, network: NetworkContext
    ) -> APIError? {
        let admission = resilience.admit(
            origin: network.origin, task: task.identifier, isFirstAttempt: attempt == 1 && !isReplay, now: network.now)
        guard case .refused(let closesIn) = admission else { return nil }
        return .circuitOpen(origin: network.origin, closesIn: closesIn)
    }

    /// Records a sent attempt's outcome for its origin, and decides whether the retry asked for fits
    /// the budget: returns the retry delay that stands (`nil` when refused).
    mutating func recordOutcome(
        of task: AnyAPITask, failure: APIError?, retryDelay: Double?, end: AttemptEnd, into actions: inout Actions
    ) -> Double? {
        guard let network = end.network else { return retryDelay }
        let origin = network.origin
        var change: Resilience.Change?
        if end.sent {
            if let failure, Resilience.isAbandoned(failure) {
                resilience.abandon(origin: origin, task: task.identifier, now: network.now)
            } else if end.sharedAnswer?.claimRecord() ?? true {
                // A shared answer is one network attempt: recorded once, whoever got it first.
                change = resilience.record(
                    origin: origin, task: task.identifier,
                    transientFailure: failure.map(Resilience.isTransient) ?? false,
                    now: network.now)
            }
        }
        if end.isMonitored {
            switch change {
            case .opened(let closesIn)?: actions.append(.report(.circuitOpened(origin: origin, closesIn: closesIn)))
            case .closed?: actions.append(.report(.circuitClosed(origin: origin)))
            case nil: break
            }
        }
        guard let failure, retryDelay != nil else { return retryDelay }
        let allowed =
            end.sharedAnswer.map { shared in
                shared.retryAllowed { resilience.allowsRetry(origin: origin, now: network.now) }
            } ?? resilience.allowsRetry(origin: origin, now: network.now)
        guard allowed else {
            if end.isMonitored { actions.append(.report(.retryRefused(failure))) }
            return nil
        }
        return retryDelay
    }
}
