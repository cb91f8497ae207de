/// State behind a ``Lock``, reachable only through ``withLock(_:)``: every read and write is one
/// closure, and no `unlock()` is ever paired by hand. Never call user code inside the closure.
final class LockedState<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `lock`, by `withLock`.
    /// The lock; other state may share it (an engine's tasks keep their records under their
    /// engine's), but `value` is reached only through ``withLock(_:)``.
    let lock: Lock
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value, lock: Lock = Lock()) {
        self.value = value
        self.lock = lock
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}
