#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A flag set on the current thread for the length of a synchronous call: what a task-local value
/// does, at a fraction of its cost (no allocation; two `pthread_setspecific` calls). For work that
/// never leaves the thread, such as building a request.
final class ThreadFlag: Sendable {
    // Sendable: the key is written once, by `init`, before the flag is shared.
    private nonisolated(unsafe) var key = pthread_key_t()

    init() {
        // A process has at least 128 keys (PTHREAD_KEYS_MAX); the library makes one.
        pthread_key_create(&key, nil)
    }

    /// Whether the flag is set on this thread.
    var isSet: Bool { pthread_getspecific(key) != nil }

    /// Runs `body` with the flag set on this thread, then restores what it was.
    func withFlagSet<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        let previous = pthread_getspecific(key)
        // Any non-null pointer means set (it is never read through): the flag's own address.
        pthread_setspecific(key, Unmanaged.passUnretained(self).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try body()
    }
}
