import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One attempt's state as a value: the phase it is in, and what its stages have made of it so far.
/// Its events change the phase in one direction only and say whether they were taken:
///
///     unbuilt ──built──▶ preparing ──sending──▶ sending ──answered──▶ answered ──takeAnswer──▶ responding
///        │                   │                     │                                              │
///        └───────────────────┴──────────over───────┴──────────────────────────────────────────────┴──▶ over
///
/// The rules it keeps: the request is built once; the transport's answer is taken only while the
/// request is on its way (a transport that completes twice, or after the attempt is over, is not
/// heard again), and handed on once; nothing happens to an attempt that is over. (A transport that
/// completes twice at the same moment on two threads is heard once too: its first answer is taken
/// under the attempt's own lock, ``AttemptLink/answer()``, before it reaches this machine.) The
/// `Attempt` holds it in its one mutable property, owned by one stage at a time (the driver runs
/// the stages one after another and hands the attempt to another thread only through a queue, a
/// Swift task or the transport's completion); the stages read its data through stored properties
/// and change it through `mutating` members only, so the value is never copied (a non-mutating
/// member called through the attempt's property would copy all of it). Tested alone, event by
/// event and by a randomized driver (`AttemptMachineTests`).
struct AttemptMachine {
    enum Phase: Equatable, Sendable, CustomStringConvertible {
        /// Made; its request not built yet (``request`` is a placeholder).
        case unbuilt
        /// Built: the credential, the adapters, the checks and the cache have their say.
        case preparing
        /// With the transport, or on a shared flight: its answer is awaited.
        case sending
        /// The transport answered: the answer waits for the `receive` stage.
        case answered
        /// Its answer was taken: a response goes through the inspectors, the refusal check and the
        /// typed response, or the failure ends the attempt.
        case responding
        /// Ended, started over or dropped: nothing more happens to it.
        case over

        var description: String {
            switch self {
            case .unbuilt: "unbuilt"
            case .preparing: "preparing"
            case .sending: "sending"
            case .answered: "answered"
            case .responding: "responding"
            case .over: "over"
            }
        }
    }

    /// The phase; changed by the events only.
    private(set) var phase = Phase.unbuilt

    // MARK: What the stages made of it (read and extended by the stage that owns the attempt)

    /// The request to send, as the stages have made it so far: a placeholder until it is built.
    var request = AttemptMachine.unbuilt
    /// The header names that carry its credentials: redacted, and dropped on a redirect to another origin.
    var sensitiveHeaders: Set<String> = []
    /// The credential the authentication granted, with its generation; `nil` for none.
    var grant: APIAuthentication.Grant?
    /// Headers were added that nobody checked (persisted ones, a cookie, the credential, the
    /// adapters'): the `prepare` stage checks them all. The request's own were checked when it was
    /// built, the engine's default ones when the engine was made (``BuildRequestStage``).
    var hasUncheckedHeaders = false
    /// The file its body streams from, if any; a temporary one (a large multipart form) is removed
    /// with the attempt.
    var bodyFile: BodyFile?
    /// How the response is treated by the cache; `nil` without a cache.
    var cache: CacheContext?
    /// When the attempt began (the engine's clock), for the engine's observers; 0 without any.
    var startedAt: TimeInterval = 0
    /// What the transport told of the exchange for the engine's observers; `nil` without observers.
    /// Written on the transport's thread (behind its own lock).
    var measured: LockedState<Attempt.Measured>?
    /// Where the response body goes: memory, a download's file or a stream.
    var body: AttemptBody = .memory
    /// Its progress reports, for a task that asks for them; `nil` otherwise.
    var progress: ProgressChannel?
    /// The key of the shared flight it boarded (``APIConcurrencyPolicy/Sharing``); `nil` when not shared.
    var flightKey: SharedFlights.Key?
    /// The answer it shares with the other attempts of its flight, set before it is given; `nil`
    /// for an answer of its own.
    var sharedAnswer: SharedAnswer?
    /// Whether a failure may be retried: not once part of a streamed body reached its consumer.
    var mayRetry = true

    /// What the transport was given, and when (the engine's clock); `nil` until it was sent.
    private(set) var sent: (options: APITransportOptions, at: TimeInterval)?
    /// Whether it was sent (``sent`` is set): read without copying what was sent.
    private(set) var wasSent = false
    /// The transport's answer, from ``answered(_:)`` until ``takeAnswer()``.
    private var answer: Result<APIRawResponse, any Error>?
    /// The response, once the transport answered with one.
    private(set) var response: APIRawResponse?

    /// The request of an attempt not built yet (never sent: nothing reads it before it is built).
    private static let unbuilt = URLRequest(url: URL(fileURLWithPath: "/"))

    // MARK: Events

    /// Its request was built; `false` (nothing kept) unless it was `unbuilt`.
    @discardableResult
    mutating func built(
        _ request: URLRequest, sensitiveHeaders: Set<String>, hasUncheckedHeaders: Bool = false, bodyFile: BodyFile?
    ) -> Bool {
        guard phase == .unbuilt else { return false }
        phase = .preparing
        self.request = request
        self.sensitiveHeaders = sensitiveHeaders
        self.hasUncheckedHeaders = hasUncheckedHeaders
        self.bodyFile = bodyFile
        return true
    }

    /// The request goes to the transport (or a shared flight) with `options`, at `time`; called
    /// before the transport has it, since it may answer inside its `send`. `false` unless `preparing`.
    @discardableResult
    mutating func sending(_ options: APITransportOptions, at time: TimeInterval) -> Bool {
        guard phase == .preparing else { return false }
        phase = .sending
        sent = (options, time)
        wasSent = true
        return true
    }

    /// The transport answered. `true` when the answer is kept for the `receive` stage, which the
    /// caller then runs; `false` when it is not heard: a second answer, or one to an attempt that is
    /// not waiting for one.
    mutating func answered(_ result: Result<APIRawResponse, any Error>) -> Bool {
        guard phase == .sending else { return false }
        phase = .answered
        answer = result
        return true
    }

    /// Takes the transport's answer, once; `nil` when there is none to take.
    mutating func takeAnswer() -> Result<APIRawResponse, any Error>? {
        guard phase == .answered else { return nil }
        phase = .responding
        return answer.take()  // moved out, not copied
    }

    /// The answer was a response (or a stored copy answered for the network): the later stages
    /// read it.
    mutating func received(_ raw: APIRawResponse) {
        guard phase == .responding else { return }
        response = raw
    }

    /// Nothing more happens to the attempt: it ended, started over, or was dropped.
    mutating func end() {
        phase = .over
        answer = nil
    }
}
