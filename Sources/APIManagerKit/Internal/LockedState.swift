/// State behind a ``Lock`` that nothing else can reach: every read and write is one closure, and no
/// `unlock()` is ever paired by hand (NIO's `NIOLockedValueBox`). Never call user code inside the
/// closure.
final class LockedState<Value>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `lock`, by `withLock`.
    private let lock = Lock()
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }

    #if DEBUG
    /// How many times the lock has been taken (debug builds only), read under it: tests count the
    /// takes of a request. The read's own take is counted.
    var takes: Int { lock.withLock { lock.takes } }
    #endif
}
