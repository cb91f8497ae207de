#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Turns nested attempt starts on one thread into a loop.
///
/// A transport may complete inside `send`; completing a task may start the next one
/// (`waitUntilDone`), whose transport completes inside `send` again … Started naively, 100,000 queued
/// tasks would nest 100,000 calls deep. Each thread keeps a list of starts to perform; a start
/// requested while the thread is already performing starts is appended and performed by the
/// outer loop, after the ones before it.
enum StartTrampoline {
    typealias Start = (engine: APIEngine, task: AnyAPITask, attempt: Int)

    private final class Context {
        var isRunning = false
        var pending: [Start] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
        pthread_key_create(&key) { Unmanaged<Context>.fromOpaque($0).release() }
        #else
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<Context>.fromOpaque(pointer).release() }
        }
        #endif
        return key
    }()

    private static var context: Context {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<Context>.fromOpaque(pointer).takeUnretainedValue()
        }
        let context = Context()
        pthread_setspecific(key, Unmanaged.passRetained(context).toOpaque())
        return context
    }

    /// Performs the starts now, or, when called from inside a start on this thread, after it.
    static func perform(_ starts: InlineList<Start>) {
        let context = context
        if context.isRunning {
            context.pending.append(contentsOf: starts)
            return
        }
        context.isRunning = true
        defer { context.isRunning = false }
        for start in starts {
            start.engine.performStart(start.task, attempt: start.attempt)
        }
        var batch: [Start] = []
        while !context.pending.isEmpty {
            swap(&batch, &context.pending)
            for start in batch {
                start.engine.performStart(start.task, attempt: start.attempt)
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
