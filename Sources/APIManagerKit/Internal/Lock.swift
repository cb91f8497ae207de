#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The platform's mutex: `os_unfair_lock` on Apple platforms, `pthread_mutex_t` elsewhere. Used
/// only through a pointer that stays where it was made (``Lock``, ``LockedAttemptLink``), and
/// held only by its `withLock(_:)`: no `unlock()` is paired by hand
/// anywhere else.
#if canImport(Darwin)
typealias LockPrimitive = os_unfair_lock
#else
typealias LockPrimitive = pthread_mutex_t
#endif

extension UnsafeMutablePointer where Pointee == LockPrimitive {
    @inline(__always)
    func initializeLock() {
        #if canImport(Darwin)
        initialize(to: os_unfair_lock())
        #else
        initialize(to: pthread_mutex_t())
        pthread_mutex_init(self, nil)
        #endif
    }

    @inline(__always)
    func destroyLock() {
        #if !canImport(Darwin)
        pthread_mutex_destroy(self)
        #endif
        deinitialize(count: 1)
    }

    /// Runs `body` while holding the mutex.
    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        #if canImport(Darwin)
        os_unfair_lock_lock(self)
        defer { os_unfair_lock_unlock(self) }
        #else
        pthread_mutex_lock(self)
        defer { pthread_mutex_unlock(self) }
        #endif
        return try body()
    }
}

/// A non-recursive mutex with no state of its own (state behind a lock is a ``LockedState``).
/// Never call user code (delegates, transports, clocks) while holding it.
final class Lock: @unchecked Sendable {
    // @unchecked: the pointer is allocated once, never reassigned, and only used through the
    // platform's thread-safe lock functions.
    private let primitive: UnsafeMutablePointer<LockPrimitive>

    init() {
        primitive = .allocate(capacity: 1)
        primitive.initializeLock()
    }

    deinit {
        primitive.destroyLock()
        primitive.deallocate()
    }

    #if DEBUG
    /// How many times the lock has been taken (debug builds only): tests count the takes of a request.
    /// Written while the lock is held; read it only when nothing else uses the lock.
    private(set) var takes = 0
    #endif

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        try primitive.withLock {
            #if DEBUG
            takes += 1
            #endif
            return try body()
        }
    }
}
