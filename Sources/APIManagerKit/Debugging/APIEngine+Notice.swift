import Dispatch

extension APIEngine {
    /// Something about the engine itself, not about one task, that the people running it should
    /// hear: told to each observer's ``Observer/notice(_:)`` (``LogObserver`` writes it as a
    /// warning), or written to standard error when the engine has no observer. Each kind at most
    /// once per engine.
    public struct Notice: Sendable, Hashable, CustomStringConvertible {
        /// What a notice is about. New kinds may come: match with `==`, not with an exhaustive `switch`.
        public struct Kind: Sendable, Hashable, CustomStringConvertible {
            private let name: String
            public var description: String { name }

            /// Delegate events have waited on their delivery queue (``APIEngine/delivery``) for
            /// seconds and no event was delivered meanwhile: nothing runs that queue. Usually the
            /// main queue (the default delivery) of a command-line tool, a server or a test that
            /// runs no main loop; use `.inline` delivery there, or run the main queue.
            public static let deliveryStalled = Kind(name: "deliveryStalled")
        }

        /// What it is about.
        public let kind: Kind
        /// What happened and what to do, in a sentence or two.
        public let description: String

        static func deliveryStalled(on queue: DispatchQueue, for interval: Double) -> Notice {
            let name = queue.label == DispatchQueue.main.label ? "the main queue" : "the queue \"\(queue.label)\""
            return Notice(
                kind: .deliveryStalled,
                description:
                    "delegate events have waited \(Int(interval)) s on \(name) (APIEngine.delivery) and none was delivered: "
                    + "nothing runs it. A command-line tool, a server or a test that runs no main loop sets "
                    + "`delivery = .inline`, or runs the main queue (dispatchMain(), RunLoop.main.run()).")
        }
    }
}
