import Dispatch
import Foundation

extension APIEngine {
    /// Where an engine does an attempt's work: building the `URLRequest` (encoding its body, applying
    /// persisted headers), the cache lookup (disk included), and building the typed response from what
    /// the transport returned.
    ///
    /// `send(_:)` itself only takes the policy decision and returns, whatever the mode.
    public enum Execution: Sendable {
        /// On a Dispatch queue of yours: never on the thread that sends, and never on the transport's
        /// callback queue. A concurrent queue builds responses of different tasks in parallel. The work
        /// inherits the quality of service of the thread that caused it (the sender, or the transport's
        /// callback). A queue that targets the global concurrent pool (as a concurrent queue does unless
        /// told otherwise) waits when an app blocks that pool's threads; ``lanes(_:)`` does not.
        case queue(DispatchQueue)
        /// On the thread that causes the work: the sender's for the first attempt, the transport's
        /// callback thread for the response, the clock's for a retry. With `MockTransport` and
        /// `TestClock` everything then happens inside `send(_:)` and `advance(by:)`, so a test stays
        /// synchronous and deterministic: `APIEngine(transport: mock, clock: clock, delivery: .inline,
        /// execution: .inline)`. It is also the server setting on AsyncHTTPClientTransport: fewer thread
        /// wake-ups, but the response is built (and decoded) on the event loop; see
        /// "The server setting" in <doc:Performance> for what it saves and when not to use it.
        case inline
        /// On serial queues (see ``APIEngine/WorkLanes``; the process's shared ones by default), each task's work on one of them:
        /// tasks build in parallel, up to one per lane, and the work goes on when an app blocks threads
        /// of the global Dispatch pool (serial queues get threads of their own then; a concurrent queue
        /// waited up to 14 s with 16 such threads blocked).
        case lanes(APIEngine.WorkLanes)

        /// The default: the process's shared lanes (``APIEngine/WorkLanes/shared``, one per active processor, at
        /// least 2), which every engine made with the default uses: a process with thousands of engines
        /// (a manager each, each with its own engine) keeps as many threads as it has lanes.
        public static var shared: APIEngine.Execution { .lanes(.shared) }

        /// ``lanes(_:)`` of the engine's own, one per active processor (at least 2): for an engine whose
        /// work must not wait behind other engines' (each set of lanes may take a thread per lane).
        public static func concurrent(label: String = "APIManagerKit.APIEngine.work") -> APIEngine.Execution {
            .lanes(APIEngine.WorkLanes(label: label))
        }

        /// The queue a task's work goes to; `nil` for `.inline` (at once, on the calling thread).
        func queue(forTask identifier: UInt64) -> DispatchQueue? {
            switch self {
            case .inline: return nil
            case .queue(let queue): return queue
            case .lanes(let lanes): return lanes.queue(forTask: identifier)
            }
        }
    }
}

extension APIEngine {
    /// Serial Dispatch queues that share an engine's work: each task's work goes to one of them (by
    /// its identifier), so different tasks run in parallel, one per lane, and a task's stages in order.
    ///
    /// Serial queues are what keeps the engine going when an app blocks threads of the global
    /// concurrent pool (`DispatchQueue.global()`, which a concurrent queue targets): Dispatch gives a
    /// serial queue a thread even then, while the pool itself grows by about a thread a second.
    public final class WorkLanes: Sendable {
        /// The lanes the engines of the process share by default (``APIEngine/Execution/shared``), made when
        /// first used: one per active processor, at least 2.
        public static let shared = APIEngine.WorkLanes(label: "APIManagerKit.work")

        /// The lanes, each a serial queue.
        public let queues: [DispatchQueue]
        /// Hands the work of async steps (interceptors, refreshes) to the lanes in turn.
        private let turn = LockedState<Int>(0)

        /// - Parameters:
        ///   - label: the queues' label, each suffixed with its number.
        ///   - count: one per active processor, at least 2, unless given; between 1 and 64.
        public init(
            label: String = "APIManagerKit.APIEngine.work",
            count: Int = max(2, ProcessInfo.processInfo.activeProcessorCount)
        ) {
            queues = (0..<min(max(count, 1), 64)).map { DispatchQueue(label: "\(label).\($0)") }
        }

        /// The lane of a task.
        func queue(forTask identifier: UInt64) -> DispatchQueue {
            queues[Int(identifier % UInt64(queues.count))]
        }

        /// The next lane in turn.
        func nextQueue() -> DispatchQueue {
            queues[
                turn.withLock { turn in
                    defer { turn = (turn + 1) % queues.count }
                    return turn
                }]
        }
    }
}
