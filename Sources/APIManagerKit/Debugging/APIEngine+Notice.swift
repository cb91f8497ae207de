import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// Something about the engine itself, not about one task's steps, that the people running it
    /// should hear: told to each observer's ``Observer/notice(_:)`` (``LogObserver`` writes it).
    /// ``Kind/deliveryStalled`` comes at most once per engine and is written to standard error when
    /// the engine has no observer; the circuit breaker's and the retry budget's each time they
    /// happen, to observers only.
    public struct Notice: Sendable, Hashable, CustomStringConvertible {
        /// What a notice is about. New kinds may come: match with `==`, not with an exhaustive `switch`.
        public struct Kind: Sendable, Hashable, CustomStringConvertible {
            private let name: String
            public var description: String { name }

            /// Delegate events have waited on their delivery queue (``APIEngine/delivery``) for
            /// seconds and no event was delivered meanwhile: nothing runs that queue. Usually the
            /// main queue (the default delivery) of a command-line tool, a server or a test that
            /// runs no main loop; use `.inline` delivery there, or run the main queue.
            public static let deliveryStalled = Kind(name: "deliveryStalled")
            /// An attempt's failure opened the circuit of ``Notice/origin`` (see
            /// ``APIEngine/CircuitBreaker``): its next attempts fail at once for
            /// ``Notice/closesIn`` seconds. On the attempt's thread.
            public static let circuitOpened = Kind(name: "circuitOpened")
            /// An attempt, the probe of a half-open circuit, succeeded: the circuit of
            /// ``Notice/origin`` is closed again. On the attempt's thread.
            public static let circuitClosed = Kind(name: "circuitClosed")
            /// The retry the task would have made after ``Notice/error`` was refused by the engine's
            /// ``APIEngine/RetryBudget``: the task ends with that error. On the attempt's thread.
            public static let retryRefused = Kind(name: "retryRefused")
            /// The engine's ``APIAuthentication`` signed out: its authenticator found the refresh
            /// credential rejected (``APIAuthentication/CredentialRejected``, in ``Notice/error``).
            /// Once per sign-out, to every engine made with the session, on the thread that ended
            /// the refresh.
            public static let signedOut = Kind(name: "signedOut")
        }

        /// What it is about.
        public let kind: Kind
        /// What happened and what to do, in a sentence or two.
        public let description: String
        /// The task whose attempt it is about (the circuit's and the budget's); `nil` for the others.
        public let task: AnyAPITask?
        /// The attempt's number (the circuit's and the budget's); `nil` for the others.
        public let attempt: Int?
        /// The origin whose circuit changed (`https://api.example.com`); `nil` for the others.
        public let origin: String?
        /// Seconds until an opened circuit lets a probe through; `nil` for the others.
        public let closesIn: TimeInterval?
        /// The failure whose retry the budget refused; `nil` for the others.
        public let error: APIError?
        /// The attempt's request, for the event monitor's events (``EventMonitorForward``); `nil` for
        /// the notices not about an attempt.
        let request: URLRequest?
        /// The names redacted in ``request`` beyond the standard rule.
        let secretNames: Set<String>

        init(
            kind: Kind, description: String, task: AnyAPITask? = nil, attempt: Int? = nil, origin: String? = nil,
            closesIn: TimeInterval? = nil, error: APIError? = nil, request: URLRequest? = nil,
            secretNames: Set<String> = []
        ) {
            self.kind = kind
            self.description = description
            self.task = task
            self.attempt = attempt
            self.origin = origin
            self.closesIn = closesIn
            self.error = error
            self.request = request
            self.secretNames = secretNames
        }

        /// Equal when they say the same about the same task (the error by its description).
        public static func == (lhs: Notice, rhs: Notice) -> Bool {
            lhs.kind == rhs.kind && lhs.description == rhs.description && lhs.task == rhs.task
                && lhs.attempt == rhs.attempt && lhs.origin == rhs.origin && lhs.closesIn == rhs.closesIn
                && lhs.error.map { "\($0)" } == rhs.error.map { "\($0)" }
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(kind)
            hasher.combine(description)
            hasher.combine(task)
            hasher.combine(attempt)
        }

        static func deliveryStalled(on queue: DispatchQueue, for interval: Double) -> Notice {
            let name = queue.label == DispatchQueue.main.label ? "the main queue" : "the queue \"\(queue.label)\""
            return Notice(
                kind: .deliveryStalled,
                description:
                    "delegate events have waited \(Int(interval)) s on \(name) (APIEngine.delivery) and none was delivered: "
                    + "nothing runs it. A command-line tool, a server or a test that runs no main loop sets "
                    + "`delivery = .inline`, or runs the main queue (dispatchMain(), RunLoop.main.run()).")
        }

        /// The notice of a session's sign-out: its refresh credential was rejected.
        static func signedOut(_ rejection: APIAuthentication.CredentialRejected) -> Notice {
            Notice(
                kind: .signedOut,
                description: "signed out: \(rejection); requests go without a credential until the app signs in again",
                error: .authenticationFailed(underlying: rejection))
        }

        /// The notice of what the circuit breaker or the retry budget did to `attempt`; `nil` for a
        /// report that is about the attempt alone (a failure before sending).
        static func resilience(_ report: SchedulingMachine.Report, of attempt: Attempt) -> Notice? {
            let task = attempt.task
            let request = attempt.machine.phase == .unbuilt ? nil : attempt.machine.request
            let secretNames = attempt.machine.sensitiveHeaders
            let about = "(task \(task.identifier), attempt \(attempt.number))"
            let attempt = attempt.number
            switch report {
            case .failedUnsent:
                return nil
            case .circuitOpened(let origin, let closesIn):
                return Notice(
                    kind: .circuitOpened, description: "circuit of \(origin) opened for \(closesIn) s \(about)",
                    task: task, attempt: attempt, origin: origin, closesIn: closesIn, request: request,
                    secretNames: secretNames)
            case .circuitClosed(let origin):
                return Notice(
                    kind: .circuitClosed, description: "circuit of \(origin) closed \(about)", task: task,
                    attempt: attempt, origin: origin, request: request, secretNames: secretNames)
            case .retryRefused(let error):
                return Notice(
                    // The error by its kind and status, never by what a server wrote (as the log's).
                    kind: .retryRefused,
                    description: "retry refused by the retry budget after \(LogObserver.summary(of: error)) \(about)",
                    task: task, attempt: attempt, error: error, request: request, secretNames: secretNames)
            }
        }
    }
}
