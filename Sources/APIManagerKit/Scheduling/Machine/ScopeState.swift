/// The in-flight tasks of one concurrency scope of one engine. Guarded by the engine's lock, which
/// makes the runtime's exclusivity checks of its lists redundant: they are off. Its lists change only
/// through its named operations below (the machine's transitions call them), each of which keeps
/// the task's record saying which list it is in.
final class ScopeState {
    let key: String?
    /// Tasks started when they were sent, in submission order (so `head` has the smallest `sequence`).
    @exclusivity(unchecked) private(set) var started = TaskList()
    /// Tasks started from the line: one at a time, since each waits for those before it, except
    /// ``APIConcurrencyPolicy/limited`` tasks, which start while fewer than their limit run.
    @exclusivity(unchecked) private(set) var startedFromLine = TaskList()
    /// Tasks waiting to start, head first.
    @exclusivity(unchecked) private(set) var line = WaitingLine()
    /// Debounced and throttled tasks waiting for their timer, outside the line.
    @exclusivity(unchecked) private(set) var quiet = TaskList()

    init(key: String?) { self.key = key }

    var isIdle: Bool { started.isEmpty && startedFromLine.isEmpty && line.isEmpty && quiet.isEmpty }
    /// The tasks of the scope running an attempt or waiting for a retry.
    var runningCount: Int { started.count + startedFromLine.count }
    var hasRunning: Bool { !started.isEmpty || !startedFromLine.isEmpty }

    // MARK: Operations (called by the machine's transitions)

    /// The task starts as it is sent (its policy let it).
    func startDirectly(_ task: AnyAPITask) { started.append(task, as: .started) }

    /// Where a task joins the line.
    enum Place {
        /// By its priority, behind the tasks of its priority.
        case byPriority
        /// Ahead of every waiting task.
        case front
        /// Behind the restored durable tasks, ahead of every other task but those at the front.
        case restored
    }

    /// The task joins the line at `place`.
    func join(_ task: AnyAPITask, at place: Place) {
        switch place {
        case .byPriority: line.join(task)
        case .front: line.joinFront(task)
        case .restored: line.joinRestored(task)
        }
    }

    /// The task waits quietly, outside the line (a debounce, a throttle's turn).
    func waitQuietly(_ task: AnyAPITask) { quiet.append(task, as: .quiet) }

    /// The head of the line starts: it leaves the line and is listed as started from it.
    func startFromLine(_ head: AnyAPITask) {
        line.remove(head)
        startedFromLine.append(head, as: .startedFromLine)
    }

    /// The task leaves whichever list of the scope it is in (see ``SchedulingRecord/membership``).
    func remove(_ task: AnyAPITask) {
        switch task.record.membership {
        case .started: started.remove(task)
        case .startedFromLine: startedFromLine.remove(task)
        case .line, .lineFront, .lineRestored: line.remove(task)
        case .quiet: quiet.remove(task)
        case .none: break
        }
    }
}
