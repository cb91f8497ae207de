import APIManagerKit
import Foundation

extension MockTransport {
    /// An `APIEngine.Connectivity` a test sets by hand: give it to the engine
    /// (`configuration.connectivity`), then set ``isReachable`` to take the network away and give it
    /// back. Every engine it was given to is told at once, on the thread that sets it.
    public final class Connectivity: APIEngine.Connectivity, @unchecked Sendable {
        // @unchecked: `state` is read and written only under `lock`; the handlers are called outside it.
        private struct State {
            var isReachable: Bool
            var handlers: [@Sendable (Bool) -> Void] = []
        }

        private let lock = NSLock()
        private var state: State

        /// - Parameter isReachable: `true` (the network is there) unless given.
        public init(isReachable: Bool = true) {
            state = State(isReachable: isReachable)
        }

        /// Whether the network is reachable; setting it tells every engine it was given to (even when
        /// it does not change, as a real path monitor may).
        public var isReachable: Bool {
            get { lock.withLock { state.isReachable } }
            set {
                let handlers = lock.withLock {
                    state.isReachable = newValue
                    return state.handlers
                }
                for handler in handlers { handler(newValue) }
            }
        }

        public func start(_ update: @escaping @Sendable (_ isReachable: Bool) -> Void) {
            let isReachable = lock.withLock {
                state.handlers.append(update)
                return state.isReachable
            }
            update(isReachable)
        }
    }
}
