import Dispatch
import Foundation

/// The closure a ``APIManager/send(_:isolation:completion:)`` caller gave, called exactly once with
/// the task's outcome, in the caller's isolation.
///
/// Whichever comes first calls it: the task's terminal event, on the delivery
/// (``ManagedTask/deliver(_:)``); its engine's end, for a task it ended without a delivery
/// (``APIEngine/deinit``); the task's own end, for one whose terminal event was dropped undelivered
/// with its engine. The others find it taken.
///
/// Where it runs: a caller that was not isolated to an actor gets it on the thread that takes it
/// (the delivery, usually). A caller on the main actor gets it on the main actor: at once when the
/// taker is on the main queue (the default delivery; `.inline` in a main-actor test), otherwise by a
/// hop to the main queue. A caller on another actor gets it on that actor, by
/// a hop.
final class TaskCompletion<Response: Sendable>: @unchecked Sendable {
    // @unchecked: `body` is not Sendable (it may capture the caller's actor-isolated state); it is
    // called at most once (`taken` says, under its lock), and only in the caller's isolation, which
    // `isolation` names; `isolation` is an actor, Sendable.
    private let body: (Result<Response, APIError>) -> Void
    private let isolation: (any Actor)?
    private let taken = LockedState(false)

    init(isolation: (any Actor)?, body: @escaping (Result<Response, APIError>) -> Void) {
        self.isolation = isolation
        self.body = body
    }

    /// Calls the closure with `result` unless it was called already.
    func complete(with result: Result<Response, APIError>) {
        let first = taken.withLock { taken in
            defer { taken = true }
            return !taken
        }
        guard first else { return }
        guard let isolation else { return body(result) }
        if isolation === MainActor.shared {
            // The main queue is the main actor's executor. (Not `Thread.isMainThread`: a process
            // in `dispatchMain()` on Linux runs the main queue on other threads.)
            if MainQueueMark.isCurrent { return body(result) }
            DispatchQueue.main.async { self.body(result) }
            return
        }
        Task { await Self.run(on: isolation, self, result) }
    }

    private static func run(
        on actor: isolated any Actor, _ completion: TaskCompletion, _ result: Result<Response, APIError>
    ) {
        completion.body(result)
    }
}

/// Tells whether the calling code runs on the main queue, by a mark the main queue carries.
enum MainQueueMark {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }
}
