import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// Told everything the engine does to each task and each of its attempts, typed, with the
    /// engine clock's times: for logs, metrics and traces (``APIEngine/Configuration/observers``;
    /// `Integrations/Observability` builds swift-log, swift-metrics and swift-distributed-tracing on
    /// it, and ``LogObserver`` is a ready-made logger).
    ///
    /// ```swift
    /// struct SlowRequests: APIEngine.Observer {
    ///     func observe(_ observation: APIEngine.Observation) {
    ///         guard case .attemptEnded(let report) = observation.kind, report.transportDuration > 1 else { return }
    ///         print("slow: \(report.method) \(report.redactedURL) took \(report.transportDuration) s")
    ///     }
    /// }
    /// ```
    ///
    /// **Where and in what order.** Never with the engine's lock held. ``Observation/Kind/sent`` on
    /// the thread that sent the task, before `send(_:)` returns and before anything else of the task,
    /// whatever other threads do meanwhile: the task joins its line only once the observers
    /// returned (so the sender's task-local values, a trace's context among them, are still there;
    /// a task restored by a durable line's replay is told on the thread that replays it, with the
    /// durable store's lock held: an observer must not send a durable task from `observe`); the
    /// attempt's ``Observation/Kind/started(attempt:)``,
    /// ``Observation/Kind/attemptSent(attempt:request:sharedWith:)``,
    /// ``Observation/Kind/attemptEnded(_:)`` and ``Observation/Kind/responseBuilt(attempt:duration:)``
    /// on the thread that runs the attempt, in that order; the task's (waiting, retries, a cached
    /// copy, the end) with the delegate's events, in their order, on ``APIEngine/delivery``,
    /// ``Observation/Kind/ended(_:)`` last of them. The two streams interleave: a retry may be told
    /// after its attempt's end or after the next attempt began, a task that ends while an attempt is
    /// on the wire (cancelled, timed out) has no `attemptEnded` for it, and an attempt sent again
    /// after a credential refresh starts again with its number. Keep `observe` fast: the engine waits
    /// for it.
    ///
    /// **What it costs.** Nothing when the engine has no observer (``Configuration/observers``
    /// empty, the default): the engine checks that once per step.
    public protocol Observer: Sendable {
        /// One thing the engine did (see ``Observer`` for the thread and the order).
        func observe(_ observation: APIEngine.Observation)

        /// The attempt's request is about to go on the wire: the interceptors, the cache and
        /// request sharing have decided, and the transport is given it next. An observer may add
        /// to it what travels with a request (a trace's context, `traceparent`). Called once per
        /// request the transport is given: a retry's and a request sent again after a renewed
        /// credential included; never for an answer from the cache or for a request that joins
        /// an identical one in flight (``APIConcurrencyPolicy/Sharing``: what an observer adds
        /// does not tell identical requests apart). On the attempt's thread, before
        /// ``Observation/Kind/attemptSent(attempt:request:sharedWith:)``. Does nothing unless
        /// implemented.
        func willSend(_ request: inout URLRequest, attempt: Int, of task: AnyAPITask)

        /// Something about the engine itself that the people running it should hear (see
        /// ``APIEngine/Notice``), without any lock held: a stalled delivery at most once per engine,
        /// on the thread of the engine's clock timer that found it; a circuit opened or closed and a
        /// retry the budget refused each time, on the attempt's thread, after its
        /// ``Observation/Kind/attemptEnded(_:)``; the session's sign-out (its refresh credential
        /// rejected) once, on the thread that ended the refresh. Does nothing unless implemented; an engine with no
        /// observer writes a stalled delivery to standard error.
        func notice(_ notice: APIEngine.Notice)
    }

    /// One thing the engine did to a task (see ``Observer``).
    public struct Observation: Sendable {
        /// The task.
        public let task: AnyAPITask
        /// When, on the engine's clock (``APIClock/now``, seconds): for the events of an attempt,
        /// when it happened; for those delivered with the delegate's events, when the observer is
        /// told (which trails the event by the delivery queue's wait).
        public let time: TimeInterval
        /// What happened.
        public let kind: Kind
        /// Names treated as secrets for the attempt's request beyond the standard rule of
        /// ``APISecrets`` (a custom authorization header, persisted headers, the engine's
        /// ``APIEngine/secretNames``): what to redact with when showing the request of
        /// ``Kind/attemptSent(attempt:request:sharedWith:)`` (``AttemptReport/sensitiveHeaders`` is the
        /// same for ``Kind/attemptEnded(_:)``). Empty for the other kinds.
        public let secretNames: Set<String>

        init(task: AnyAPITask, time: TimeInterval, kind: Kind, secretNames: Set<String> = []) {
            self.task = task
            self.time = time
            self.kind = kind
            self.secretNames = secretNames
        }

        /// What happened to the task.
        public enum Kind: Sendable {
            /// The task was sent (its policy not yet applied); first of all its observations.
            case sent
            /// The task waits: `ahead` tasks are before it in its scope's line when the observer is
            /// told (0: it is next); `nil` when it waits outside a line (a debounce's quiet time, a
            /// throttled task's turn) or has left the line since.
            case waiting(ahead: Int?)
            /// The task waits for the network (``APIRequest/connectivityWait``): its attempt found the
            /// engine offline, or failed with an offline error; it goes again when the network is
            /// back. Told each time it begins such a wait.
            case waitingForNetwork
            /// An attempt began (its request is about to be built), on its thread.
            case started(attempt: Int)
            /// The attempt's request went to the transport, as sent (secrets included: print
            /// ``APIEngine/AttemptReport/redactedURL``), or joined the identical request of task
            /// `sharedWith` (``APIConcurrencyPolicy/Sharing``).
            case attemptSent(attempt: Int, request: URLRequest, sharedWith: UInt64?)
            /// The transport answered the attempt (any status) or failed, with its timings.
            case attemptEnded(APIEngine.AttemptReport)
            /// The server refused the attempt's credential and the engine's ``APIAuthentication`` took
            /// the refusal over: the attempt waits for the renewed credential (one refresh for every
            /// refused task), then is sent again with the same number.
            case renewingCredential(attempt: Int)
            /// The attempt's typed response was built from the answer (or failed to be) in `duration`
            /// seconds.
            case responseBuilt(attempt: Int, duration: TimeInterval)
            /// A stored copy was given before the network's answer (``APIResponseCache/Option/both``).
            case cachedCopy
            /// The attempt failed with `error`; the next one starts after `delay` seconds.
            case retryScheduled(after: TimeInterval, error: APIError)
            /// The task ended: with a response from `source`, or with an error (cancelled by a
            /// policy, ignored, timed out, failed; cancelled with `managerReleased` when its engine
            /// was released with it in flight, told then on the releasing thread). Last of its
            /// observations but a late attempt's.
            case ended(Result<APIResponseCache.Source, APIError>)
        }
    }

    /// An attempt's answer from the transport, with its timings (engine clock, seconds).
    public struct AttemptReport: Sendable {
        /// The attempt's number, 1 for the first.
        public let attempt: Int
        /// The request as sent, secrets included: print ``redactedURL``.
        public let request: URLRequest
        /// The transport's answer (any status) or the reason it failed.
        public let result: Result<APIRawResponse, APIError>
        /// When the attempt began: its task left its line, or its retry's wait ended.
        public let started: TimeInterval
        /// When the request was handed to the transport (after building, authenticating, adapting).
        public let sent: TimeInterval
        /// When the response's status line and headers arrived, as the transport told it
        /// (``APITransportOptions/headReceived``: ``URLSessionTransport``, `AsyncHTTPClientTransport`
        /// and `MockTransport` do); `nil` when no response came, or the transport does not say.
        public let headReceived: TimeInterval?
        /// When the transport answered (the whole body received).
        public let answered: TimeInterval
        /// The exchange's phases, when the transport measured them
        /// (``APITransportOptions/phasesMeasured``: ``URLSessionTransport`` on Apple platforms);
        /// `nil` otherwise.
        public let phases: Phases?
        /// The HTTP version the response came in (`1.0`, `1.1`, `2`, `3`), when the transport told
        /// it (``APITransportOptions/protocolVersionReceived``: `AsyncHTTPClientTransport` does,
        /// ``URLSessionTransport`` on Apple platforms does, FoundationNetworking on Linux cannot);
        /// `nil` otherwise.
        public let protocolVersion: String?
        /// Names treated as secrets for this request beyond the standard rule (see ``APISecrets``).
        public let sensitiveHeaders: Set<String>

        /// Seconds from the attempt's start to the transport (building the request).
        public var buildDuration: TimeInterval { sent - started }
        /// Seconds the transport took to answer.
        public var transportDuration: TimeInterval { answered - sent }

        /// The phases of an exchange as a transport measured them, in seconds; `nil` for a phase
        /// it did not measure or that did not happen (no DNS lookup or connection on a reused
        /// connection, no TLS over `http`).
        public struct Phases: Sendable, Hashable {
            /// Looking the host's name up.
            public var domainLookup: TimeInterval?
            /// Connecting, TLS included.
            public var connect: TimeInterval?
            /// The TLS handshake.
            public var secureConnection: TimeInterval?
            /// Sending the request.
            public var request: TimeInterval?
            /// From the request sent to the response's first byte: the server's time.
            public var waiting: TimeInterval?
            /// Receiving the response.
            public var response: TimeInterval?
            /// Whether the exchange went over a connection already open.
            public var reusedConnection: Bool?

            /// Phases; none measured unless given.
            public init(
                domainLookup: TimeInterval? = nil, connect: TimeInterval? = nil,
                secureConnection: TimeInterval? = nil, request: TimeInterval? = nil, waiting: TimeInterval? = nil,
                response: TimeInterval? = nil, reusedConnection: Bool? = nil
            ) {
                self.domainLookup = domainLookup
                self.connect = connect
                self.secureConnection = secureConnection
                self.request = request
                self.waiting = waiting
                self.response = response
                self.reusedConnection = reusedConnection
            }
        }
        /// Seconds from handing the request to the transport to the response's head (time to first
        /// byte); `nil` without ``headReceived``.
        public var timeToFirstByte: TimeInterval? { headReceived.map { $0 - sent } }
        /// The request's method (`GET` when it sets none).
        public var method: String { request.httpMethod ?? "GET" }
        /// The request's URL with its secrets redacted (see ``APISecrets``).
        public var redactedURL: String {
            request.url.map { APISecrets.redacted($0, additionalNames: sensitiveHeaders) } ?? ""
        }
        /// The response's status; `nil` when the transport failed.
        public var statusCode: Int? {
            if case .success(let response) = result { return response.statusCode }
            return nil
        }
    }
}

extension APIEngine.Observer {
    public func willSend(_ request: inout URLRequest, attempt: Int, of task: AnyAPITask) {}
    public func notice(_ notice: APIEngine.Notice) {}
}

// MARK: The engine's side

extension APIEngine {
    /// Tells every observer (there is at least one).
    func tellObservers(
        _ kind: Observation.Kind, of task: AnyAPITask, at time: TimeInterval? = nil, secretNames: Set<String> = []
    ) {
        let observation = Observation(task: task, time: time ?? clock.now, kind: kind, secretNames: secretNames)
        for observer in observers { observer.observe(observation) }
    }

    /// Tells the observers of `attempt` (the engine's, and the event monitor's forward when one is
    /// set: ``Attempt/observers``) what happened to it; `time`: now unless given.
    func tellObservers(
        _ kind: Observation.Kind, of attempt: Attempt, at time: TimeInterval? = nil, secretNames: Set<String> = []
    ) {
        let observation = Observation(
            task: attempt.task, time: time ?? clock.now, kind: kind, secretNames: secretNames)
        for observer in attempt.observers { observer.observe(observation) }
    }

    /// Whether anyone hears what the machine reports about `attempt` (``SchedulingMachine/Report``):
    /// its observers (the engine's, the event monitor's forward).
    func isReported(_ attempt: Attempt) -> Bool {
        !attempt.observers.isEmpty
    }

    /// Tells what the machine reported about `attempt` to its observers: the circuit's and the
    /// budget's as notices; a failure before sending to the event monitor's forward alone (no
    /// observation says it). The one place reports go out.
    func tell(_ report: SchedulingMachine.Report, about attempt: Attempt) {
        guard let notice = Notice.resilience(report, of: attempt) else {
            if case .failedUnsent(let error) = report {
                for case let forward as EventMonitorForward in attempt.observers {
                    forward.failedUnsent(error, attempt: attempt.number, of: attempt.task)
                }
            }
            return
        }
        for observer in attempt.observers { observer.notice(notice) }
    }

    /// Tells the observers about an event delivered with the delegate's (see ``Observer``).
    func tellObservers(delivered event: AnyAPITask.Event, of task: AnyAPITask) {
        let kind: Observation.Kind
        switch event {
        case .waiting: kind = .waiting(ahead: state.withLock { $0.machine.tasksAhead(of: task) })
        case .waitingForNetwork: kind = .waitingForNetwork
        case .started, .progress: return  // an attempt's start is told where it begins (`performStart`)
        case .willRetry(let delay, let error): kind = .retryScheduled(after: delay, error: error)
        case .cachedResponse: kind = .cachedCopy
        case .finished: kind = .ended(.success(task.responseSource ?? .network))
        case .failed(let error): kind = .ended(.failure(error))
        }
        tellObservers(kind, of: task)
    }
}
