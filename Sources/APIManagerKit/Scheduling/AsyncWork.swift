import Dispatch
import Synchronization

/// Runs the async parts of an attempt (interceptors, a credential refresh) where the engine's
/// ``APIEngine/Execution`` says: with `.inline` on the thread that starts them and, after a suspension, on
/// the thread that resumes them (so a test that resumes an interceptor sees its effects when the
/// call returns); with `.queue` on that queue; with `.lanes`, each Swift task on one lane. (Apple systems older than macOS 15 and
/// iOS 18 have no task executors: there the work runs on the global concurrent executor.)
struct AsyncWork: Sendable {
    /// Starts a Swift task on the chosen executor; `nil` where there are no task executors.
    private let starter: (@Sendable (@escaping @Sendable () async -> Void) -> Started)?

    init(execution: APIEngine.Execution) {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) else {
            starter = nil
            return
        }
        let executor: @Sendable () -> any TaskExecutor
        switch execution {
        case .inline:
            let inline = InlineTaskExecutor()
            executor = { inline }
        case .queue(let queue):
            let onQueue = QueueTaskExecutor(queue: queue)
            executor = { onQueue }
        case .lanes(let lanes):
            // Each Swift task on one lane, the lanes in turn: a task's jobs never run at once anyway.
            executor = { QueueTaskExecutor(queue: lanes.nextQueue()) }
        }
        starter = { operation in
            let run = RunState()
            let task = Task(executorPreference: executor()) {
                await operation()
                run.finish()
            }
            return run.isFinished ? .finished : .running(SwiftTaskHandle(task))
        }
    }

    private enum Started {
        case finished
        case running(SwiftTaskHandle)
    }

    /// Starts `operation` in a Swift task of its own. Returns the handle that cancels that task, or
    /// `nil` when it already finished (it ran inline without suspending).
    func start(_ operation: @escaping @Sendable () async -> Void) -> (any APICancellable)? {
        guard let starter else {
            return SwiftTaskHandle(Task(operation: operation))
        }
        switch starter(operation) {
        case .finished: return nil
        case .running(let handle): return handle
        }
    }
}

/// Whether a Swift task's operation has returned.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private final class RunState: Sendable {
    private let finished = Atomic<Bool>(false)
    func finish() { finished.store(true, ordering: .releasing) }
    var isFinished: Bool { finished.load(ordering: .acquiring) }
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
