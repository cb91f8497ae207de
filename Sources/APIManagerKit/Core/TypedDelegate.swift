/// A manager's delegate kept as the type its setter was given (`any CartAPIDelegate`), held weakly.
///
/// The engine is not generic over its managers, so it keeps each delegate behind this class, and the
/// manager reads it back as its own `Delegate` with no conformance lookup on the way. A lookup (`as?
/// any CartAPIDelegate`) does not find an isolated conformance (`extension Screen: @MainActor
/// CartAPIDelegate`, SE-0470) outside the main actor's own code, as on the main queue: the delegate
/// then read back `nil` and its events were lost without a word. The conformance is found once, where
/// the user converts the screen to `any CartAPIDelegate` (in its own isolation), and kept.
///
/// `Delegate` is usually an existential, which generic code cannot hold `weak`: the object is held by
/// a weak reference, for liveness, and the value's bytes are kept without a retain (as
/// `unowned(unsafe)` would keep them), read only while the weak reference gives a strong one. Only
/// a value whose dynamic type is a class is kept so (a struct's bytes would own references of
/// their own); anything else makes no box, as a weak reference to it would be `nil` at once.
final class TypedDelegate<Delegate>: @unchecked Sendable {
    // Sendable: both stored properties are set once in `init`; the weak reference is read
    // atomically by the runtime, and the bytes are only read (copied) while it gives a strong one.
    private weak var object: AnyObject?
    private let bytes: UnsafeMutableRawPointer

    init?(_ value: Delegate) {
        guard type(of: value as Any) is AnyObject.Type else { return nil }
        object = value as AnyObject
        let size = MemoryLayout<Delegate>.size
        bytes = .allocate(byteCount: size, alignment: MemoryLayout<Delegate>.alignment)
        withUnsafeBytes(of: value) { UnsafeMutableRawBufferPointer(start: bytes, count: size).copyMemory(from: $0) }
    }

    deinit {
        bytes.deallocate()  // nothing to release: the bytes were copied without a retain
    }

    /// The delegate, or `nil` once it is gone.
    var value: Delegate? {
        guard let object else { return nil }
        return withExtendedLifetime(object) { bytes.load(as: Delegate.self) }
    }
}
