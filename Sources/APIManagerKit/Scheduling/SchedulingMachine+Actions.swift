extension SchedulingMachine {
    /// One thing a transition decided to do once the lock is released. `Equatable`, so a test of the
    /// machine compares what an event returns with what it expects, action by action: tasks and
    /// handles compare by identity, observations by what they tell.
    enum Action: Equatable, CustomStringConvertible {
        /// Build the task's attempt and run it.
        case start(AnyAPITask, attempt: Int)
        /// Hand the built request of the attempt to the transport (the answer to ``requestBuilt(_:attempt:)``).
        case send(AnyAPITask, attempt: Int)
        /// Wait for the credential's refresh, then build the attempt again and send it (the answer
        /// to ``credentialRefused(_:attempt:)``).
        case replay(AnyAPITask, attempt: Int)
        /// Cancel a transport request, an async step of an attempt, or a timer.
        case cancel(Handle)
        /// Schedule the timer that starts the task's next attempt; report it with ``retryTimerSet(_:attempt:timer:)``.
        case scheduleRetry(AnyAPITask, attempt: Int, after: Double)
        /// Schedule the task's deadline; report it with ``deadlineTimerSet(_:timer:)``.
        case scheduleDeadline(AnyAPITask, after: Double)
        /// Tell the async caller waiting for the task.
        case tell(AnyAPITask, AnyAPITask.Observation)

        static func == (lhs: Action, rhs: Action) -> Bool {
            switch (lhs, rhs) {
            case (.start(let a, let x), .start(let b, let y)), (.send(let a, let x), .send(let b, let y)),
                (.replay(let a, let x), .replay(let b, let y)):
                return a === b && x == y
            case (.cancel(let a), .cancel(let b)):
                return a == b
            case (.scheduleRetry(let a, let x, let d), .scheduleRetry(let b, let y, let e)):
                return a === b && x == y && d == e
            case (.scheduleDeadline(let a, let d), .scheduleDeadline(let b, let e)):
                return a === b && d == e
            case (.tell(let a, let x), .tell(let b, let y)):
                return a === b && x.summary == y.summary
            default:
                return false
            }
        }

        var description: String {
            switch self {
            case .start(let task, let attempt): return "start(\(task.identifier)#\(attempt))"
            case .send(let task, let attempt): return "send(\(task.identifier)#\(attempt))"
            case .replay(let task, let attempt): return "replay(\(task.identifier)#\(attempt))"
            case .cancel(let handle): return "cancel(\(handle.cancellable))"
            case .scheduleRetry(let task, let attempt, let delay):
                return "scheduleRetry(\(task.identifier)#\(attempt), after: \(delay))"
            case .scheduleDeadline(let task, let deadline):
                return "scheduleDeadline(\(task.identifier), after: \(deadline))"
            case .tell(let task, let observation): return "tell(\(task.identifier), \(observation.summary))"
            }
        }
    }

    /// Something to cancel, compared by identity (a handle that is not an object equals nothing).
    struct Handle: Equatable {
        let cancellable: any APICancellable

        init(_ cancellable: any APICancellable) { self.cancellable = cancellable }

        static func == (lhs: Handle, rhs: Handle) -> Bool {
            guard type(of: lhs.cancellable) is AnyClass, type(of: rhs.cancellable) is AnyClass else { return false }
            return (lhs.cancellable as AnyObject) === (rhs.cancellable as AnyObject)
        }
    }

    /// What a transition decided, in the order it decided it, and whether queued events are to be
    /// delivered. The first action is kept inline: a send or an attempt's end nearly always decides
    /// one, so a transition does not allocate.
    struct Actions: Sequence, Equatable {
        private var list = InlineList<Action>()
        /// Events were queued while no delivery was scheduled: their delivery is to be scheduled.
        var deliverEvents = false

        var isEmpty: Bool { list.isEmpty }

        mutating func append(_ action: Action) { list.append(action) }

        func makeIterator() -> InlineList<Action>.Iterator { list.makeIterator() }

        func contains(_ action: Action) -> Bool { contains { $0 == action } }

        static func == (lhs: Actions, rhs: Actions) -> Bool {
            lhs.deliverEvents == rhs.deliverEvents && Array(lhs) == Array(rhs)
        }
    }
}

extension AnyAPITask.Observation {
    /// What the observation tells, as a line (tests compare it).
    var summary: String {
        switch self {
        case .cached: return "cached"
        case .ended(.success, let source): return "finished from \(source.map { "\($0)" } ?? "nowhere")"
        case .ended(.failure(let error), _): return "failed \(error)"
        }
    }
}
