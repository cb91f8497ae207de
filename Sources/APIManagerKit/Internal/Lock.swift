#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A non-recursive mutex: `os_unfair_lock` on Apple platforms, `pthread_mutex_t` elsewhere.
///
/// One `Lock` guards all the scheduling state of an ``APIEngine`` and of the tasks it owns.
/// Never call user code (delegates, transports, clocks) while holding it.
final class Lock: @unchecked Sendable {
    // @unchecked: the pointer is allocated once, never reassigned, and only used through the
    // platform's thread-safe lock functions.
    #if canImport(Darwin)
    private let primitive: UnsafeMutablePointer<os_unfair_lock>
    #else
    private let primitive: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    init() {
        #if canImport(Darwin)
        primitive = .allocate(capacity: 1)
        primitive.initialize(to: os_unfair_lock())
        #else
        primitive = .allocate(capacity: 1)
        primitive.initialize(to: pthread_mutex_t())
        pthread_mutex_init(primitive, nil)
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(primitive)
        #endif
        primitive.deinitialize(count: 1)
        primitive.deallocate()
    }

    #if DEBUG
    /// How many times the lock has been taken (debug builds only): tests count the takes of a request.
    /// Written while the lock is held; read it only when nothing else uses the lock.
    private(set) var takes = 0
    #endif

    @inline(__always)
    func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #else
        pthread_mutex_lock(primitive)
        #endif
        #if DEBUG
        takes += 1
        #endif
    }

    @inline(__always)
    func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #else
        pthread_mutex_unlock(primitive)
        #endif
    }

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
