extension SchedulingMachine {
    /// One thing a transition decided to do once the lock is released. `Equatable`, so a test of the
    /// machine compares what an event returns with what it expects, action by action: tasks and
    /// handles compare by identity, observations by what they tell.
    enum Action: Equatable, CustomStringConvertible {
        /// Build the task's attempt and run it.
        case start(AnyAPITask, attempt: Int)
        /// Hand the built request of the attempt to the transport (the answer to ``requestBuilt(_:attempt:isReplay:cachedCopy:network:isMonitored:)``).
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
        /// Schedule the end of the task's wait in line (``APIConcurrencyPolicy/LineLimit/maxWait``); report it with
        /// ``waitTimerSet(_:timer:)``.
        case scheduleWaitLimit(AnyAPITask, after: Double)
        /// Lets the tasks waiting for the network try again after this long, the engine having found
        /// itself offline by a failure (``SchedulingMachine/probeFired()``).
        case scheduleProbe(after: Double)
        /// Schedule the end of a debounced task's quiet wait; report it with
        /// ``waitTimerSet(_:timer:)``.
        case scheduleQuietEnd(AnyAPITask, after: Double)
        /// Schedule the next turn of a throttled scope key (``throttleTurnCame(for:now:)``); never
        /// cancelled (a turn that finds no task waiting starts nothing).
        case scheduleThrottleTurn(String?, after: Double)
        /// Tell the async caller waiting for the task.
        case tell(AnyAPITask, AnyAPITask.Observation)
        /// Tell the task's engine that its group handed it a slot (``groupSlotGranted(_:)``).
        case grantSlot(AnyAPITask)
        /// Tell the event monitor of the attempt the event was about (see ``Report``): by the attempt's
        /// driver, an unsent failure before the other actions, the rest after them.
        case report(Report)
        /// Rest the shared flight the task's attempt was on while the task waits to retry it (see
        /// ``SharedFlights/retrying(_:task:)``): performed before the retry's timer is scheduled.
        case restFlight(AnyAPITask)
        /// What becomes of the ended durable task's record (``DurableSlot/decide(_:engine:)``):
        /// carried out once the app has been told the end as well.
        case settleDurable(AnyAPITask, DurableSlot.Settlement)
        /// Feed the task's own streams (its ``AnyAPITask/progress`` sequences, the body stream of
        /// ``APIManager/bytes(for:)`` and its siblings): a progress report, numbered in the order the
        /// machine took them, or their end, after so many reports (``TaskBag/feed(_:)``).
        case feedStreams(AnyAPITask, StreamFeed)

        static func == (lhs: Action, rhs: Action) -> Bool {
            switch (lhs, rhs) {
            case (.start(let a, let x), .start(let b, let y)), (.send(let a, let x), .send(let b, let y)),
                (.replay(let a, let x), .replay(let b, let y)):
                return a === b && x == y
            case (.cancel(let a), .cancel(let b)):
                return a == b
            case (.scheduleRetry(let a, let x, let d), .scheduleRetry(let b, let y, let e)):
                return a === b && x == y && d == e
            case (.scheduleDeadline(let a, let d), .scheduleDeadline(let b, let e)),
                (.scheduleWaitLimit(let a, let d), .scheduleWaitLimit(let b, let e)),
                (.scheduleQuietEnd(let a, let d), .scheduleQuietEnd(let b, let e)):
                return a === b && d == e
            case (.grantSlot(let a), .grantSlot(let b)), (.restFlight(let a), .restFlight(let b)):
                return a === b
            case (.report(let a), .report(let b)):
                return a == b
            case (.scheduleProbe(let a), .scheduleProbe(let b)):
                return a == b
            case (.scheduleThrottleTurn(let a, let d), .scheduleThrottleTurn(let b, let e)):
                return a == b && d == e
            case (.tell(let a, let x), .tell(let b, let y)):
                return a === b && x.summary == y.summary
            case (.settleDurable(let a, let x), .settleDurable(let b, let y)):
                return a === b && x == y
            case (.feedStreams(let a, let x), .feedStreams(let b, let y)):
                return a === b && x == y
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
            case .scheduleWaitLimit(let task, let wait):
                return "scheduleWaitLimit(\(task.identifier), after: \(wait))"
            case .scheduleQuietEnd(let task, let wait):
                return "scheduleQuietEnd(\(task.identifier), after: \(wait))"
            case .scheduleProbe(let delay): return "scheduleProbe(after: \(delay))"
            case .scheduleThrottleTurn(let scope, let delay):
                return "scheduleThrottleTurn(\(scope ?? "nil"), after: \(delay))"
            case .tell(let task, let observation): return "tell(\(task.identifier), \(observation.summary))"
            case .grantSlot(let task): return "grantSlot(\(task.identifier))"
            case .report(let report): return "report(\(report))"
            case .restFlight(let task): return "restFlight(\(task.identifier))"
            case .settleDurable(let task, let settlement): return "settleDurable(\(task.identifier), \(settlement))"
            case .feedStreams(let task, let feed): return "feedStreams(\(task.identifier), \(feed))"
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

    /// What a transition decided, and whether queued events are to be delivered. Kept by kind, each
    /// kind in the order decided, as the engine performs them: cancellations, then the async
    /// callers, the deadline, wait-limit and retry timers, and the attempts to start (nearly always one, kept
    /// inline, so a transition allocates nothing). ``list`` gives them as ``Action``s, in that order.
    struct Actions: Equatable, Sequence {
        private(set) var cancellations: [any APICancellable] = []
        private(set) var observations: [(AnyAPITask, AnyAPITask.Observation)] = []
        /// Timers to schedule, group slots to hand on, reports and flights to leave, in the order
        /// decided: rarer than the rest, so they share one array (an empty array still costs a
        /// release when dropped).
        private(set) var timersAndGrants: [Action] = []
        private(set) var starts = InlineList<(task: AnyAPITask, attempt: Int)>()
        /// The attempt that may go to the transport (the answer to ``SchedulingMachine/requestBuilt(_:attempt:isReplay:cachedCopy:network:isMonitored:)``).
        private(set) var send: (task: AnyAPITask, attempt: Int)?
        /// The attempt that may be replayed (the answer to ``SchedulingMachine/credentialRefused(_:attempt:)``).
        private(set) var replay: (task: AnyAPITask, attempt: Int)?
        /// Events were queued while no delivery was scheduled: their delivery is to be scheduled.
        var deliverEvents = false

        @inline(__always)
        mutating func append(_ action: Action) {
            switch action {
            case .start(let task, let attempt): starts.append((task, attempt))
            case .send(let task, let attempt): send = (task, attempt)
            case .replay(let task, let attempt): replay = (task, attempt)
            case .cancel(let handle): cancellations.append(handle.cancellable)
            case .scheduleRetry, .scheduleDeadline, .scheduleWaitLimit, .scheduleQuietEnd, .scheduleThrottleTurn,
                .scheduleProbe, .grantSlot, .report, .restFlight, .settleDurable, .feedStreams:
                timersAndGrants.append(action)
            case .tell(let task, let observation): observations.append((task, observation))
            }
        }

        /// The tasks whose group handed them a slot.
        var grants: [AnyAPITask] {
            timersAndGrants.compactMap { if case .grantSlot(let task) = $0 { task } else { nil } }
        }

        /// The ended durable tasks' records and what becomes of each.
        var settlements: [(task: AnyAPITask, settlement: DurableSlot.Settlement)] {
            timersAndGrants.compactMap {
                if case .settleDurable(let task, let settlement) = $0 { (task, settlement) } else { nil }
            }
        }

        /// What the event monitor is to be told, in the order decided.
        var reports: [Report] {
            timersAndGrants.compactMap { if case .report(let report) = $0 { report } else { nil } }
        }

        /// Whether the attempt may go to the transport.
        func sends(_ task: AnyAPITask, attempt: Int) -> Bool {
            send.map { $0.task === task && $0.attempt == attempt } ?? false
        }

        /// Whether the attempt may be replayed.
        func replays(_ task: AnyAPITask, attempt: Int) -> Bool {
            replay.map { $0.task === task && $0.attempt == attempt } ?? false
        }

        /// The actions, by kind in the order they are performed.
        var list: [Action] {
            var list = cancellations.map { Action.cancel(Handle($0)) }
            list += observations.map { Action.tell($0.0, $0.1) }
            list += timersAndGrants.filter {
                switch $0 {
                case .grantSlot, .report: false
                default: true
                }
            }
            list += starts.map { Action.start($0.task, attempt: $0.attempt) }
            list += grants.map { Action.grantSlot($0) }
            list += reports.map { Action.report($0) }
            if let send { list.append(.send(send.task, attempt: send.attempt)) }
            if let replay { list.append(.replay(replay.task, attempt: replay.attempt)) }
            return list
        }

        func makeIterator() -> IndexingIterator<[Action]> { list.makeIterator() }

        static func == (lhs: Actions, rhs: Actions) -> Bool {
            lhs.deliverEvents == rhs.deliverEvents && lhs.list == rhs.list
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

/// What a task's own streams are told (``SchedulingMachine/Action/feedStreams(_:_:)``): a progress
/// report with its number (the machine numbers a task's reports from 1, in the order it takes them,
/// so that reports performed on different threads reach the streams in that order), or the end,
/// with the number of reports that come before it and the task's error (`nil`: it finished).
enum StreamFeed: Equatable, CustomStringConvertible {
    case progress(APITransferProgress, number: UInt32)
    case end(failure: APIError?, afterReports: UInt32)

    static func == (lhs: StreamFeed, rhs: StreamFeed) -> Bool {
        switch (lhs, rhs) {
        case (.progress(let a, let x), .progress(let b, let y)): return a == b && x == y
        case (.end(let a, let x), .end(let b, let y)): return a?.description == b?.description && x == y
        case (.progress, _), (.end, _): return false
        }
    }

    var description: String {
        switch self {
        case .progress(let progress, let number): return "progress #\(number) \(progress.completedBytes)"
        case .end(let failure, let reports): return "end(\(failure.map { "\($0)" } ?? "finished") after \(reports))"
        }
    }
}
