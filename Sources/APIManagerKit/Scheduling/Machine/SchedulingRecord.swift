/// What the scheduling machine keeps of one task. Only the machine reads and writes it, in this
/// folder (`Scheduling/Machine/`); the task's handle asks the machine for what users read
/// (`SchedulingMachine.state(of:)`, `attemptCount(of:)`, `responseSource(of:)`), and
/// `Scripts/check-machine-state.py`, run by the test script, fails when code elsewhere names it.
/// It is stored in the task (``AnyAPITask/record``) rather than in a table of the machine's, so
/// that an event reaches it without a lookup: a table would cost a lookup per event, a slot number
/// per handle, and would have to keep an ended task's record (an abandoned attempt's late callback
/// still reads it) as long as the handle lives. Guarded by the engine's lock.
struct SchedulingRecord {
    /// The task's lifecycle, each stage with what it holds.
    enum Lifecycle {
        /// Made, not yet sent; `cancelledBeforeSend` when it was cancelled already.
        case created(cancelledBeforeSend: APIError.CancellationReason?)
        /// Sent, in its scope's line; with the timer of its ``APIConcurrencyPolicy/LineLimit/maxWait`` once set.
        case waiting(timer: (any APICancellable)?)
        /// An attempt runs.
        case running(RunningAttempt)
        /// An attempt failed; the next one starts when the timer (once set) fires.
        case waitingForRetry(attempt: Int, timer: (any APICancellable)?)
        /// The engine is offline and the task waits for the network (``APIRequest/connectivityWait``),
        /// holding its place; with the error of the attempt that found it offline (`nil`: it found out
        /// before it began one).
        case waitingForConnectivity(error: APIError?)
        case ended(Ending)
    }

    struct RunningAttempt {
        let number: Int
        /// The attempt itself, once the engine made it (``SchedulingMachine/attemptStarted(_:attempt:handle:)``):
        /// cancelling it ends it on whatever thread runs it and cancels what it waits on (an async
        /// step, the transport), which the attempt keeps (``AttemptLink``). Cancelled when the task
        /// ends while the attempt runs.
        var handle: (any APICancellable)?
        /// Its request was built and admitted: it is handed, or being handed, to the transport.
        var isSent = false
    }

    struct Ending {
        /// The error the task ended with; `nil` when it finished with a response. The response
        /// itself is not kept: a task the caller holds after it ended does not keep its body alive.
        var failure: APIError?
        var source: APIResponseCache.Source?
        /// The attempt whose request was being built when the task ended: it is never sent, and its
        /// origin's admission is given back when it is built (``SchedulingMachine/requestBuilt(_:attempt:isReplay:cachedCopy:network:isMonitored:)``).
        var abandonedAttempt: Int?
    }

    /// Which list of its scope the task is in: started when sent, started from the line, waiting
    /// (at the line's front, or by priority), or in a quiet wait (debounced or throttled).
    enum Membership { case none, started, startedFromLine, line, lineFront, lineRestored, quiet }

    var lifecycle = Lifecycle.created(cancelledBeforeSend: nil)
    /// The number of attempts started; the current (or last) attempt's number.
    var attemptCount = 0
    /// What the task's waits for the network (``APIRequest/connectivityWait``) left: made the first
    /// time it waits; `nil` for every other task (a reference, so that they pay 8 bytes and a `nil`
    /// check).
    var connectivityWait: ConnectivityWait?

    /// A task's waits for the network. Guarded by the engine's lock.
    final class ConnectivityWait {
        /// The attempts that ended for want of a network: not counted when its retry policy decides
        /// (``SchedulingMachine/attemptStarted(_:attempt:handle:)``).
        var offlineAttempts = 0
        /// The limit of the current wait is scheduled: from when it began to wait, across the
        /// probes' attempts, until an attempt reaches a server.
        var limitIsRunning = false
        /// The limit's timer, once set (`nil` while it is being set, and after it fired).
        var timer: (any APICancellable)?
        /// The limit passed while a probe's attempt ran: found offline again, the task ends.
        var limitHasPassed = false
    }
    /// The order in which the engine accepted the task.
    var sequence: UInt64 = 0
    var deadlineTimer: (any APICancellable)?
    /// Whether the task was already sent again after its credential was refused (at most once).
    var hasReplayed = false
    /// Whether an async caller waits for this task (its typed observer lives in the typed task).
    var isObserved = false
    /// Whether the task got its identifier before it was sent (``SchedulingMachine/identify(_:)``).
    var isIdentified = false
    /// Whether the task holds a slot of its ``APIConcurrencyPolicy/Group``, or waits for one (its policy
    /// started it; it is listed as started, its lifecycle still `.waiting`).
    var holdsGroupSlot = false
    var awaitsGroupSlot = false
    /// The scope the task is listed in while in flight, and in which of its lists.
    var scope: ScopeState?
    var membership = Membership.none
    /// The progress reports fed to the task's streams so far (``StreamFeed``): counted only for a
    /// task whose request reports progress. (Beside `membership`, it fills the padding before
    /// `quietLimit`: the record does not grow.)
    var streamReports: UInt32 = 0
    /// The ``APIConcurrencyPolicy/LineLimit/maxWait`` that ends a debounced task's quiet wait before
    /// its end; `nil` when the end comes first.
    var quietLimit: Double?
    // Intrusive list links: a task is in at most one list of its scope at a time.
    var previous: AnyAPITask?
    var next: AnyAPITask?

    var hasEnded: Bool {
        if case .ended = lifecycle { return true }
        return false
    }

    /// Takes the lifecycle out, leaving `.waiting(timer: nil)` in its place, so that a transition changes its
    /// payload and puts it back without copying it (every path puts one back).
    mutating func takeLifecycle() -> Lifecycle {
        var taken = Lifecycle.waiting(timer: nil)
        swap(&taken, &lifecycle)
        return taken
    }
}

/// An intrusive doubly linked list of tasks, threaded through their records: append, prepend and
/// removal in O(1) without allocating. Guarded by the engine's lock.
struct TaskList {
    private(set) var head: AnyAPITask?
    private(set) var tail: AnyAPITask?
    private(set) var count = 0

    var isEmpty: Bool { head == nil }

    mutating func append(_ task: AnyAPITask, as membership: SchedulingRecord.Membership) {
        task.record.membership = membership
        task.record.previous = tail
        task.record.next = nil
        if let tail { tail.record.next = task } else { head = task }
        tail = task
        count += 1
    }

    mutating func prepend(_ task: AnyAPITask, as membership: SchedulingRecord.Membership) {
        task.record.membership = membership
        task.record.previous = nil
        task.record.next = head
        if let head { head.record.previous = task } else { tail = task }
        head = task
        count += 1
    }

    /// Unlinks a task that is in this list.
    mutating func remove(_ task: AnyAPITask) {
        let previous = task.record.previous
        let next = task.record.next
        if let previous { previous.record.next = next } else { head = next }
        if let next { next.record.previous = previous } else { tail = previous }
        task.record.previous = nil
        task.record.next = nil
        task.record.membership = .none
        count -= 1
    }

    /// The tasks from head to tail, as an array (for sweeps that end tasks while walking).
    func snapshot() -> [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        tasks.reserveCapacity(count)
        var cursor = head
        while let task = cursor {
            tasks.append(task)
            cursor = task.record.next
        }
        return tasks
    }
}
