import Dispatch

/// Runs the async parts of an attempt (interceptors, a credential refresh) where the engine's
/// ``APIExecution`` says: with `.inline` on the thread that starts them and, after a suspension, on
/// the thread that resumes them (so a test that resumes an interceptor sees its effects when the
/// call returns); with `.queue` on the engine's work queue. (Apple systems older than macOS 15 and
/// iOS 18 have no task executors: there the work runs on the global concurrent executor.)
struct AsyncWork: Sendable {
    private let executor: (any Sendable)?

    init(execution: APIExecution) {
        switch execution {
        case .inline:
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
                executor = InlineTaskExecutor()
            } else {
                executor = nil
            }
        case .queue(let queue):
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
                executor = QueueTaskExecutor(queue: queue)
            } else {
                executor = nil
            }
        }
    }

    /// Starts `operation` in a Swift task of its own; cancelling the handle cancels that task.
    @discardableResult
    func start(_ operation: @escaping @Sendable () async -> Void) -> any APICancellable {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *),
            let executor = executor as? any TaskExecutor
        {
            return SwiftTaskHandle(Task(executorPreference: executor, operation: operation))
        }
        // Older Apple systems have no task executors: the work runs on the global concurrent executor.
        return SwiftTaskHandle(Task(operation: operation))
    }
}

/// Cancels a Swift task.
private struct SwiftTaskHandle: APICancellable {
    let task: Task<Void, Never>
    init(_ task: Task<Void, Never>) { self.task = task }
    func cancel() { task.cancel() }
}

/// Runs each job at once, on the thread that enqueues it: the task starts inside `start` and resumes
/// inside whatever call resumed it.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private final class InlineTaskExecutor: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        job.runSynchronously(on: asUnownedTaskExecutor())
    }
}

/// Runs each job on a Dispatch queue.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private final class QueueTaskExecutor: TaskExecutor {
    let queue: DispatchQueue
    init(queue: DispatchQueue) { self.queue = queue }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
