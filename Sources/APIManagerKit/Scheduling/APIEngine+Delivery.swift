import Dispatch

extension APIEngine {
    /// Where a manager's delegate events are delivered.
    ///
    /// Either way, events reach the manager's forwarding methods (and so the delegate) one at a time, in
    /// the order the engine produced them (so in order for each task), never while an internal lock is
    /// held, and without blocking the threads that send, cancel or complete tasks.
    public enum Delivery: Sendable {
        /// Asynchronously on this queue. `.queue(.main)` is the default, for apps: a delegate on the
        /// main actor hears every event there. Events that wait 5 seconds on a queue that takes none
        /// of them (a process that never runs its main queue) are said once, as an ``APIEngine/Notice``.
        case queue(DispatchQueue)
        /// On the thread that produced the event, once that thread has released every lock; if another
        /// thread is already delivering, that thread delivers this event too, after the ones before it.
        /// For command-line tools, servers and tests, which may not run a main queue. The same word
        /// as ``APIEngine/Execution/inline``: on the thread at hand. A delegate on the main actor
        /// takes it only where events come on the main actor already: a `@MainActor` test whose
        /// engine's execution is `.inline` too.
        case inline

        /// The name of ``inline`` before 1.0.
        @available(*, deprecated, renamed: "inline")
        public static var immediate: APIEngine.Delivery { .inline }
    }
}
