/// A scope's waiting tasks, in the order they start: ``APIConcurrencyPolicy/waitUntilDoneHighPriority``
/// tasks first, newest first; then the tasks a durable line restored (``AnyAPITask/isRestored``),
/// in their line's order, whatever their priority (they were sent before any task of this run);
/// then by ``AnyAPITask/priority``, highest first, equal priorities in sending order. Joining, leaving and the head are O(1) for the front and for priority 0 (the
/// default), and O(P) for another priority, P being the number of distinct priorities waiting.
struct WaitingLine {
    private var front = TaskList()
    /// Restored durable tasks, oldest first.
    private var restored = TaskList()
    /// Priority 0, the default: no lookup.
    private var normal = TaskList()
    private var others: [Int: TaskList] = [:]
    /// The priorities above 0 that have waiting tasks, highest first; then those below 0.
    private var higher: [Int] = []
    private var lower: [Int] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    var head: AnyAPITask? {
        if let head = front.head { return head }
        if let head = restored.head { return head }
        if let priority = higher.first { return others[priority]?.head }
        if let head = normal.head { return head }
        if let priority = lower.first { return others[priority]?.head }
        return nil
    }

    /// Joins by priority, behind the tasks of its priority.
    mutating func join(_ task: AnyAPITask) {
        count += 1
        let priority = task.priority
        if priority == 0 {
            normal.append(task, as: .line)
            return
        }
        if others[priority] == nil {
            if priority > 0 {
                higher.insert(priority, at: higher.firstIndex { $0 < priority } ?? higher.endIndex)
            } else {
                lower.insert(priority, at: lower.firstIndex { $0 < priority } ?? lower.endIndex)
            }
        }
        others[priority, default: TaskList()].append(task, as: .line)
    }

    /// Joins at the front, ahead of every waiting task.
    mutating func joinFront(_ task: AnyAPITask) {
        count += 1
        front.prepend(task, as: .lineFront)
    }

    /// Joins behind the restored tasks, ahead of every task of this run but those at the front.
    mutating func joinRestored(_ task: AnyAPITask) {
        count += 1
        restored.append(task, as: .lineRestored)
    }

    mutating func remove(_ task: AnyAPITask) {
        count -= 1
        let priority = task.priority
        if task.record.membership == .lineFront {
            front.remove(task)
        } else if task.record.membership == .lineRestored {
            restored.remove(task)
        } else if priority == 0 {
            normal.remove(task)
        } else {
            others[priority]?.remove(task)
            if others[priority]?.isEmpty ?? true {
                others[priority] = nil
                higher.removeAll { $0 == priority }
                lower.removeAll { $0 == priority }
            }
        }
    }

    /// The waiting tasks, head first.
    func snapshot() -> [AnyAPITask] {
        var tasks = front.snapshot() + restored.snapshot()
        for priority in higher { tasks += others[priority]?.snapshot() ?? [] }
        tasks += normal.snapshot()
        for priority in lower { tasks += others[priority]?.snapshot() ?? [] }
        return tasks
    }
}
