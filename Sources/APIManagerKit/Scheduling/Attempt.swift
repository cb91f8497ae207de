import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One attempt of a task on its way through the stages, from the built request to the typed
/// response: the one object every stage reads and extends, its state a value machine
/// (``AttemptMachine``), and what other threads touch of it another, behind its own lock
/// (``AttemptLink``).
///
/// A class, so that handing it from stage to stage (and into the transport's completion) passes one
/// reference instead of copying a dozen fields. It is owned by one stage at a time: the driver runs
/// the stages one after another, and it reaches another thread only through a queue, a Swift task or
/// the transport's completion, each of which orders what came before it.
final class Attempt: @unchecked Sendable {
    // @unchecked: `machine`, its one mutable property, is owned by one stage at a time (see above;
    // its own rules in ``AttemptMachine``); `link` is behind its own lock; the `let`s never change,
    // and `engine` is a weak reference, which is thread-safe. The runtime's exclusivity checks of
    // `machine` are off: the same rule makes them redundant, and they cost 1,505 instructions a
    // request (SendCost `plain` 27,850 -> 29,355, measured 2026-11-29).
    let task: AnyAPITask
    /// The attempt's number: 1 for the first; a replay keeps its attempt's number.
    let number: Int
    /// Its number as the task's retry policy counts it: attempts that found the network unreachable
    /// while the task waits for one are left out (read when it started).
    let countedNumber: Int
    /// Whether it is the attempt sent again after a credential refresh.
    let isReplay: Bool
    /// Told what happens to the attempt: the engine's observers, then the event monitor's forward
    /// when one is set (``EventMonitorForward``); read once when the attempt began. Empty when
    /// nobody observes: then nothing is measured or told.
    let observers: [any APIEngine.Observer]
    /// The engine that runs it, held weakly: a transport's completion that outlives the engine
    /// does nothing.
    weak let engine: APIEngine?
    /// Whether it is over, what it waits on, whether its transport answered: shared with the thread
    /// that ends its task (the scheduling machine keeps it as the task's handle and cancels it).
    let link: LockedAttemptLink

    /// The attempt's phase and what its stages made of it (see ``AttemptMachine``). The attempt
    /// exists before its request, so that a request that cannot be built fails its attempt like
    /// any other failure.
    @exclusivity(unchecked) var machine = AttemptMachine()

    /// See ``AttemptMachine/measured``.
    struct Measured {
        /// When the response's head arrived (the engine's clock).
        var headReceived: TimeInterval?
        var phases: APIEngine.AttemptReport.Phases?
        /// The HTTP version the response came in, as the transport told it.
        var protocolVersion: String?
    }

    init(
        engine: APIEngine, task: AnyAPITask, number: Int, countedNumber: Int, isReplay: Bool,
        link: LockedAttemptLink, observers: [any APIEngine.Observer]
    ) {
        self.engine = engine
        self.task = task
        self.number = number
        self.countedNumber = countedNumber
        self.isReplay = isReplay
        self.link = link
        self.observers = observers
    }

    /// The transport's completion: its first answer only (``AttemptLink/answer()``, whichever
    /// thread gives it) waits in the machine, and the attempt goes on at `receive` where the
    /// engine's execution says. (A closure capturing only the attempt allocates no context.)
    func transportAnswered(_ result: Result<APIRawResponse, any Error>) {
        guard link.withLock({ $0.answer() }), machine.answered(result) else { return }
        engine?.run(self, from: .receive)
    }

    /// Whether its task ended (or moved on) while it ran: then nothing more is worth doing for it.
    var isOver: Bool { link.withLock { $0.isOver } }

    /// The attempt waits on `work`, an async step: cancelled if the attempt ends, at once if it is
    /// over already.
    func wait(on work: any APICancellable) {
        link.handle { $0.wait(on: work) }
    }

    /// The transport took the request (``AttemptLink/sent(_:)``): its handle is cancelled if the
    /// attempt ends, at once if it is over already.
    func sent(_ handle: any APICancellable) {
        link.handle { $0.sent(handle) }
    }

    /// What interceptors are told about the attempt.
    var context: APIAttempt { APIAttempt(task: task, number: number, isReplay: isReplay) }

    /// The stages, in order. A stage that has nothing to do for an attempt passes it on.
    enum Stage: Sendable {
        /// Puts the authentication's credential on the request, once no refresh runs.
        case authenticate
        /// Passes the request through the adapters.
        case adapt
        /// Applies the link rule (credentials only to their origins), checks the request, and starts
        /// over when the credential changed while the adapters ran.
        case prepare
        /// Asks the cache.
        case lookUp
        /// Hands the request to the transport (once the machine says the attempt may go).
        case send
        /// Takes the transport's answer (``AttemptMachine/takeAnswer()``).
        case receive
        /// Passes the response through the inspectors.
        case inspect
        /// Sees whether the response refuses the credential the attempt carried.
        case checkRefusal
        /// Waits for the renewed credential (the machine allowed a replay), then starts over; or, when
        /// the authentication does not take the refusal over, goes on to build the response.
        case renew
        /// Validates the response and builds the typed one.
        case respond

        /// The stage after this one, when a stage goes on.
        var following: Stage? {
            switch self {
            case .authenticate: return .adapt
            case .adapt: return .prepare
            case .prepare: return .lookUp
            case .lookUp: return .send
            case .send: return nil  // the transport's answer resumes the attempt at `receive`
            case .receive: return .inspect
            case .inspect: return .checkRefusal
            case .checkRefusal: return .respond
            case .renew: return .respond  // when the authentication does not take the refusal over
            case .respond: return nil
            }
        }
    }

    /// What a stage says it did.
    enum Outcome: Sendable {
        /// Go on with the next stage.
        case next
        /// An async step runs (a wait for a refresh, interceptors): it resumes the attempt when done.
        /// The attempt's link keeps its handle, to cancel it if the task ends; `nil` when the step already
        /// finished (it ran inline and resumed the attempt before returning).
        case waiting((any APICancellable)?)
        /// The request is ready for the transport: the machine decides whether it may go. A stored
        /// copy, if any, is delivered first (``APIResponseCache/Option/both``).
        case readyToSend(cachedCopy: AnyAPITask.BuiltResponse?)
        /// The transport has the request (its answer resumes the attempt); the attempt's link keeps
        /// its handle.
        case sent(any APICancellable)
        /// The response refuses the credential: the machine decides whether it is sent again.
        case refused
        /// The attempt ends with a response, from `source`.
        case answered(AnyAPITask.BuiltResponse, APIResponseCache.Source)
        /// The attempt failed; it is retried if the manager's retry hook says so. (The errors are
        /// boxed: they are large, and the outcomes that pass between stages every time are not.)
        indirect case failed(APIError)
        /// An inspector asked for another attempt after `delay`; the attempt fails with `error`.
        indirect case retry(after: TimeInterval, APIError)
        /// The attempt starts again from the built request (the credential changed; a replay).
        case startOver(isReplay: Bool)
        /// The attempt is no longer the task's current one: nothing more is done for it.
        case dropped
    }
}
