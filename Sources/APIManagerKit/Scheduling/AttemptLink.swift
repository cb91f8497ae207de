/// The part of an attempt that another thread touches: whether it is over, what it waits on, and
/// whether its transport has answered. A value machine behind the attempt's own lock
/// (``Attempt/link``); everything else of the attempt is its ``AttemptMachine``, owned by one stage
/// at a time.
///
/// Two races meet here, each settled by one event under the lock:
/// - **The task ends while the attempt runs** (a cancel, a deadline, a policy, the manager
///   released): the scheduling machine cancels the attempt (``SchedulingMachine/attemptStarted(_:attempt:handle:)``
///   kept it as the task's handle), on the thread that ended the task. ``end()`` marks it over and
///   cancels what it waits on; what it waits on later is cancelled as it is given (``wait(on:)``).
///   The attempt's stages read ``isOver`` where work would be wasted or a hook would run for a task
///   that ended: nothing is asked of the engine's lock.
/// - **The transport answers twice** (its contract says once): ``answer()`` takes the first
///   answer only, whichever thread gives it. An attempt that is over still hears its answer (a
///   cancelled request's error, or a late success): its origin's circuit counts it.
///
/// Tested event by event and by a randomized driver from many threads (`AttemptLinkTests`).
struct AttemptLink: Equatable {
    /// What an event asks the caller to do once the lock is released.
    enum Action: Equatable {
        case none
        /// Cancel the work the attempt waited on (never under the lock: a transport's `cancel`
        /// may call back).
        case cancel(SchedulingMachine.Handle)
    }

    /// What the attempt waits on now: an async step or the transport's handle. Not taken out when
    /// the work finishes: cancelling finished work does nothing (``APICancellable``).
    private(set) var waitingOn: SchedulingMachine.Handle?
    /// The task ended (or moved on) while the attempt ran: nothing more is worth doing for it.
    private(set) var isOver = false
    /// The transport gave its answer.
    private(set) var isAnswered = false

    /// The attempt waits on `work`, an async step: kept, to be cancelled if the attempt ends;
    /// cancelled at once when it is over already.
    mutating func wait(on work: any APICancellable) -> Action {
        let handle = SchedulingMachine.Handle(work)
        if isOver { return .cancel(handle) }
        waitingOn = handle
        return .none
    }

    /// The transport took the request and gave its handle: kept like an async step's, unless the
    /// transport answered already (inside `send`, or on another thread before `send` returned:
    /// then the attempt may wait on a step after the answer, which the handle must not replace).
    mutating func sent(_ handle: any APICancellable) -> Action {
        if isAnswered, !isOver { return .none }
        return wait(on: handle)
    }

    /// The attempt is no longer its task's current one: over, and what it waits on is cancelled.
    /// Once; again it does nothing.
    mutating func end() -> Action {
        guard !isOver else { return .none }
        isOver = true
        defer { waitingOn = nil }
        return waitingOn.map { .cancel($0) } ?? .none
    }

    /// The transport answered: `true` for its first answer only.
    mutating func answer() -> Bool {
        guard !isAnswered else { return false }
        isAnswered = true
        return true
    }
}

/// An attempt's link behind a lock of its own, the two in one allocation (a `ManagedBuffer`, as
/// NIO's lock storage is); copies share them. The attempt's handle in the scheduling machine,
/// which cancels it when the task ends while the attempt runs. Never call out while holding its
/// lock.
struct LockedAttemptLink: APICancellable, @unchecked Sendable {
    // @unchecked: the storage's header (the link) is read and written only while its tail element
    // (the mutex) is locked, by `withLock`.
    private let storage: Storage

    init() {
        storage = Storage.make()
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout AttemptLink) -> Result) -> Result {
        storage.withUnsafeMutablePointers { link, lock in lock.withLock { body(&link.pointee) } }
    }

    /// Runs `event` on the link and performs the action it returns, once the lock is released.
    @inline(__always)
    func handle(_ event: (inout AttemptLink) -> AttemptLink.Action) {
        if case .cancel(let handle) = withLock(event) { handle.cancellable.cancel() }
    }

    /// Ends the attempt (``AttemptLink/end()``) and cancels what it waited on.
    func cancel() {
        handle { $0.end() }
    }

    /// The link (the header) and the platform's mutex (the one tail element). A `ManagedBuffer`'s
    /// subclass keeps no stored property of its own.
    final class Storage: ManagedBuffer<AttemptLink, LockPrimitive> {
        static func make() -> Storage {
            let buffer = create(minimumCapacity: 1) { _ in AttemptLink() }
            buffer.withUnsafeMutablePointerToElements { $0.initializeLock() }
            return unsafeDowncast(buffer, to: Storage.self)
        }

        deinit {
            withUnsafeMutablePointerToElements { $0.destroyLock() }
        }
    }
}
