import Foundation

extension APIManager {
    /// Sends a request whose response body is read as it arrives: the parts of a `2xx` body, in
    /// order, with backpressure (the transport waits while the consumer is more than 4 MiB behind).
    ///
    /// The task runs under the request's policy, deadline and events like any other; its typed
    /// response, built at the end from the status and headers (the body went to the stream), reaches
    /// the delegate. An error status fails the stream with the task's ``APIError`` before any part;
    /// a failure before any part reached the stream is retried by the request's retry policy, one
    /// after is not (the stream throws). Ending the iteration early cancels the task. Streamed
    /// responses are never shared or written to a ``APIRequest/download`` file, and use the cache
    /// only when the request's ``APIRequest/cacheOption`` asks (a stored body comes as one part).
    ///
    /// ```swift
    /// for try await chunk in chat.bytes(for: CompletionRequest(prompt: "Hello")) {
    ///     output.append(chunk)
    /// }
    /// ```
    public func bytes(for request: Request) -> APIByteStream {
        let buffer = StreamBuffer()
        let task = makeTask(for: request, bodyStream: buffer)
        engine.submit(task)
        return APIByteStream(task: task, buffer: buffer, manager: self)
    }

    /// Sends a request whose response is a `text/event-stream`, and yields its server-sent events as
    /// they arrive (see ``APIServerSentEvent/Parser``), with the backpressure and cancellation of
    /// ``bytes(for:)``. `Accept: text/event-stream` is for the request to send.
    ///
    /// Only a `200` with `Content-Type: text/event-stream` is read as events (HTML §9.2.3); any
    /// other answer fails the connection for good: an error status with the task's
    /// ``APIError/unacceptableStatus(_:message:)``, another `2xx` or another type with
    /// ``APIError/rejected(underlying:response:)`` whose `underlying` is
    /// ``APIServerSentEvent/Stream/NotAnEventStream``; the task fails with the same error, and no
    /// reconnection is made. A typed response that does not build ends the iteration with its error.
    ///
    /// With `reconnection`, a stream that drops (the connection lost, or the body ending) is sent
    /// again after the server's `retry` time (at most the reconnection's `maxDelay`; else its
    /// `delay`), with `Last-Event-ID` set to the last event ID seen (none when it is empty), up to
    /// the reconnection's number of times; an error status, a `204 No Content` or a cancellation
    /// ends it for good (cancelling the Swift task that iterates ends the wait for a reconnection at
    /// once).
    ///
    /// Each reconnection is a new task under the request's policy, with one exception: a
    /// reconnection never cancels a newer task of its scope. A ``APIConcurrencyPolicy/cancelOthers``
    /// stream reconnects as ``APIConcurrencyPolicy/ignoreCurrent``: when a task of its scope is
    /// waiting or running (a newer one: the stream's own had ended), the stream was superseded, and
    /// it ends with ``APIError/cancelled(reason:)`` `.policy`, as it would had it been running.
    public func events(for request: Request, reconnection: APIServerSentEvent.Reconnection? = nil)
        -> APIServerSentEvent.Stream
    {
        let first = StreamBuffer(expectsEventStream: true)
        let task = makeTask(for: request, bodyStream: first)
        engine.submit(task)
        let reconnectionPolicy: APIConcurrencyPolicy? =
            request.concurrencyPolicy == .cancelOthers ? .ignoreCurrent : nil
        return APIServerSentEvent.Stream(
            bytes: APIByteStream(task: task, buffer: first, manager: self), reconnection: reconnection,
            reconnect: { [self] lastEventID in
                let buffer = StreamBuffer(expectsEventStream: true)
                let task = makeTask(
                    for: request, bodyStream: buffer,
                    addedHeaders: lastEventID.flatMap { $0.isEmpty ? nil : ["Last-Event-ID": $0] },
                    policy: reconnectionPolicy)
                engine.submit(task)
                return APIByteStream(task: task, buffer: buffer, manager: self)
            },
            clock: engine.clock)
    }

    /// Sends a request whose response is JSON Lines (NDJSON), and yields each line decoded as
    /// `Element` as it arrives, with the backpressure and cancellation of ``bytes(for:)``. A line that
    /// does not decode ends the stream with ``APIError/decoding(underlying:response:)`` and cancels
    /// the task.
    public func lines<Element: Decodable & Sendable>(
        for request: Request, as type: Element.Type = Element.self, decoder: JSONDecoder = JSONDecoder()
    ) -> APIJSONLinesStream<Element> {
        APIJSONLinesStream(bytes: bytes(for: request), decoder: decoder)
    }
}

extension APIServerSentEvent {
    /// When and how often a dropped event stream is sent again (see ``APIManager/events(for:reconnection:)``).
    public struct Reconnection: Sendable, Hashable {
        /// The most reconnections in a row without an event between them. `5` unless given.
        public var maxAttempts: Int
        /// The wait before reconnecting when the server named no `retry` time, in seconds. `3` unless
        /// given (what browsers wait).
        public var delay: TimeInterval
        /// The longest wait before reconnecting, whatever the server's `retry` asks, in seconds. `60`
        /// unless given: a server cannot park the stream for days.
        public var maxDelay: TimeInterval

        /// A reconnection; each default is given with its property.
        public init(maxAttempts: Int = 5, delay: TimeInterval = 3, maxDelay: TimeInterval = 60) {
            self.maxAttempts = max(0, maxAttempts)
            self.delay = max(0, delay)
            self.maxDelay = max(0, maxDelay)
        }

        /// The wait before a reconnection: the server's `retry` (milliseconds) up to ``maxDelay``, else
        /// ``delay``.
        func wait(serverRetry milliseconds: Int?) -> TimeInterval {
            guard let milliseconds else { return delay }
            return min(Double(max(0, milliseconds)) / 1000, maxDelay)
        }
    }
}

extension APIServerSentEvent {
    /// The server-sent events of a streamed response (``APIManager/events(for:reconnection:)``), parsed
    /// as they arrive. Its iterator's ``Iterator/lastEventID`` and ``Iterator/reconnectionTime`` say where
    /// a new request would resume (sent with `Last-Event-ID`); with an ``APIServerSentEvent/Reconnection`` it does so by
    /// itself.
    public struct Stream: AsyncSequence, Sendable {
        public typealias Element = APIServerSentEvent

        /// The byte stream it parses (the first one, when it reconnects).
        public let bytes: APIByteStream
        let reconnection: APIServerSentEvent.Reconnection?
        let reconnect: @Sendable (String?) -> APIByteStream
        let clock: any APIClock

        init(
            bytes: APIByteStream, reconnection: APIServerSentEvent.Reconnection?,
            reconnect: @escaping @Sendable (String?) -> APIByteStream,
            clock: any APIClock
        ) {
            self.bytes = bytes
            self.reconnection = reconnection
            self.reconnect = reconnect
            self.clock = clock
        }

        public func makeAsyncIterator() -> Iterator {
            Iterator(bytes: bytes.makeAsyncIterator(), stream: self)
        }

        /// Why an answer was not read as an event stream: it was not a `200` with
        /// `Content-Type: text/event-stream` (HTML §9.2.3). The ``APIError/rejected(underlying:response:)``
        /// that carries it has the response.
        public struct NotAnEventStream: Error, Sendable, Hashable, CustomStringConvertible {
            /// The answer's status.
            public var statusCode: Int
            /// The answer's `Content-Type`; `nil` when it had none.
            public var contentType: String?

            public var description: String {
                "not an event stream: status \(statusCode), Content-Type \(contentType ?? "(none)")"
            }
        }

        /// Whether an answer is an event stream: a `200` whose media type is `text/event-stream`
        /// (compared without case, parameters ignored).
        static func isEventStream(statusCode: Int, contentType: String?) -> Bool {
            guard statusCode == 200, let contentType else { return false }
            let essence = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            return essence.trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream"
        }

        /// Reads the events in order.
        public struct Iterator: AsyncIteratorProtocol {
            var bytes: APIByteStream.Iterator
            let stream: APIServerSentEvent.Stream
            var parser = APIServerSentEvent.Parser()
            var pending: [APIServerSentEvent] = []
            var index = 0
            var reconnections = 0
            var done = false

            init(bytes: APIByteStream.Iterator, stream: APIServerSentEvent.Stream) {
                self.bytes = bytes
                self.stream = stream
            }

            /// The last event ID seen so far.
            public var lastEventID: String? { parser.lastEventID }
            /// The reconnection time the stream asked for, in milliseconds.
            public var reconnectionTime: Int? { parser.reconnectionTime }
            /// How many times the stream was sent again since its last event.
            public var reconnectionCount: Int { reconnections }

            public mutating func next() async throws -> APIServerSentEvent? {
                while index == pending.count {
                    if done { return nil }
                    let chunk: Data?
                    do {
                        chunk = try await bytes.next()
                    } catch let error as APIError {
                        parser.finish()
                        if reconnections > 0, case .ignored = error {
                            // A cancelOthers stream's reconnection found a newer task of its scope.
                            done = true
                            throw APIError.cancelled(reason: .policy)
                        }
                        guard Self.dropped(error), try await reconnectIfAsked() else {
                            done = true
                            throw error
                        }
                        continue
                    }
                    guard let chunk else {
                        parser.finish()
                        // A 204 says: do not reconnect.
                        let noContent = bytes.consumer.buffer.status.withLock { $0 } == 204
                        if noContent {
                            done = true
                        } else if try await !reconnectIfAsked() {
                            done = true
                        }
                        continue
                    }
                    pending = try parser.parse(chunk)
                    index = 0
                    if !pending.isEmpty { reconnections = 0 }
                }
                index += 1
                return pending[index - 1]
            }

            /// Waits `delay` seconds on `clock`, or until the Swift task is cancelled (its timer then
            /// cancelled): the wait resumes once, whichever comes first.
            private static func sleep(for delay: TimeInterval, on clock: any APIClock) async {
                let wait = ReconnectionWait()
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        wait.start(continuation) { clock.schedule(after: delay, $0) }
                    }
                } onCancel: {
                    wait.end()
                }
            }

            /// A drop: the transport failed (not an error status, not a cancellation).
            private static func dropped(_ error: APIError) -> Bool {
                if case .transport = error { return true }
                return false
            }

            /// Waits and sends the request again, when a reconnection is asked and allowed.
            private mutating func reconnectIfAsked() async throws -> Bool {
                guard let reconnection = stream.reconnection, reconnections < reconnection.maxAttempts else {
                    return false
                }
                try Task.checkCancellation()
                reconnections += 1
                await Self.sleep(for: reconnection.wait(serverRetry: parser.reconnectionTime), on: stream.clock)
                try Task.checkCancellation()
                bytes = stream.reconnect(parser.lastEventID).makeAsyncIterator()
                return true
            }
        }
    }
}

/// The JSON Lines of a streamed response (``APIManager/lines(for:as:decoder:)``), each decoded as
/// it arrives.
public struct APIJSONLinesStream<Element: Decodable & Sendable>: AsyncSequence, Sendable {
    /// The byte stream it splits.
    public let bytes: APIByteStream
    let decoder: JSONDecoder

    public func makeAsyncIterator() -> Iterator {
        Iterator(bytes: bytes.makeAsyncIterator(), decoder: decoder)
    }

    /// Reads the lines in order.
    public struct Iterator: AsyncIteratorProtocol {
        var bytes: APIByteStream.Iterator
        let decoder: JSONDecoder
        var splitter = APIByteStream.JSONLinesSplitter()
        var pending: [Data] = []
        var index = 0
        var ended = false

        public mutating func next() async throws -> Element? {
            while index == pending.count {
                if ended { return nil }
                if let chunk = try await bytes.next() {
                    pending = try splitter.split(chunk)
                } else {
                    pending = splitter.finish()
                    ended = true
                }
                index = 0
            }
            index += 1
            let line = pending[index - 1]
            do {
                return try decoder.decode(Element.self, from: line)
            } catch {
                bytes.consumer.task.cancel(reason: .concurrency)
                throw APIError.decoding(underlying: error, response: APIRawResponse(statusCode: 200, body: line))
            }
        }
    }
}

/// One wait for a reconnection: its continuation and timer, ended once, by the timer or by the
/// cancellation of the Swift task that waits (which may come first, even before the wait started).
private final class ReconnectionWait: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Void, Never>?
        var timer: (any APICancellable)?
        var ended = false
    }
    private let state = LockedState(State())

    /// Keeps the continuation and sets the timer (`schedule` gets the action that ends the wait); a
    /// wait already ended resumes at once.
    func start(
        _ continuation: CheckedContinuation<Void, Never>,
        schedule: (@escaping @Sendable () -> Void) -> any APICancellable
    ) {
        let endedAlready = state.withLock { state -> Bool in
            if !state.ended { state.continuation = continuation }
            return state.ended
        }
        if endedAlready { return continuation.resume() }
        let timer = schedule { [self] in end() }
        let cancelNow = state.withLock { state -> Bool in
            if state.ended { return true }
            state.timer = timer
            return false
        }
        if cancelNow { timer.cancel() }
    }

    /// Ends the wait: resumes its continuation once and cancels its timer.
    func end() {
        let ended = state.withLock { state -> State in
            defer { state = State(ended: true) }
            return state
        }
        ended.timer?.cancel()
        ended.continuation?.resume()
    }
}
