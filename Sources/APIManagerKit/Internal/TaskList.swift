/// An intrusive doubly linked list of tasks, threaded through `AnyAPITask.previous/next`:
/// append, prepend and removal in O(1) without allocating. Guarded by the engine's lock.
struct TaskList {
    private(set) var head: AnyAPITask?
    private(set) var tail: AnyAPITask?
    private(set) var count = 0

    var isEmpty: Bool { head == nil }

    mutating func append(_ task: AnyAPITask, as membership: AnyAPITask.Membership) {
        task.membership = membership
        task.previous = tail
        task.next = nil
        if let tail { tail.next = task } else { head = task }
        tail = task
        count += 1
    }

    mutating func prepend(_ task: AnyAPITask, as membership: AnyAPITask.Membership) {
        task.membership = membership
        task.previous = nil
        task.next = head
        if let head { head.previous = task } else { tail = task }
        head = task
        count += 1
    }

    /// Unlinks a task that is in this list.
    mutating func remove(_ task: AnyAPITask) {
        if let previous = task.previous { previous.next = task.next } else { head = task.next }
        if let next = task.next { next.previous = task.previous } else { tail = task.previous }
        task.previous = nil
        task.next = nil
        task.membership = .none
        count -= 1
    }

    /// The tasks from head to tail, as an array (for sweeps that end tasks while walking).
    func snapshot() -> [AnyAPITask] {
        var tasks: [AnyAPITask] = []
        tasks.reserveCapacity(count)
        var cursor = head
        while let task = cursor {
            tasks.append(task)
            cursor = task.next
        }
        return tasks
    }
}

/// The in-flight tasks of one concurrency scope of one engine.
final class ScopeState {
    let key: String?
    /// Tasks started when they were sent, in submission order (so `head` has the smallest `sequence`).
    var started = TaskList()
    /// Tasks started from the line; at most one at a time, since each waits for those before it.
    var startedFromLine = TaskList()
    /// Tasks waiting to start, head first.
    var line = TaskList()

    init(key: String?) { self.key = key }

    var isIdle: Bool { started.isEmpty && startedFromLine.isEmpty && line.isEmpty }
    var hasRunning: Bool { !started.isEmpty || !startedFromLine.isEmpty }

    /// Whether the head of the line may start: nothing started from the line is still in flight, and
    /// every task started directly that was sent before it has ended.
    func canStart(_ candidate: AnyAPITask) -> Bool {
        guard startedFromLine.isEmpty else { return false }
        guard let oldest = started.head else { return true }
        return oldest.sequence > candidate.sequence
    }
}
