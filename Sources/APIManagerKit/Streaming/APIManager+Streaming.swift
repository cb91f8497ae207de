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
    /// responses are never cached, shared or written to a ``APIRequest/download`` file.
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
    /// they arrive (see ``APIServerSentEventParser``), with the backpressure and cancellation of
    /// ``bytes(for:)``. `Accept: text/event-stream` is for the request to send.
    public func events(for request: Request) -> APIServerSentEventStream {
        APIServerSentEventStream(bytes: bytes(for: request))
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

/// The server-sent events of a streamed response (``APIManager/events(for:)``), parsed as they
/// arrive. Its ``lastEventID`` and ``reconnectionTime`` say where a new request would resume
/// (send it with `Last-Event-ID`).
public struct APIServerSentEventStream: AsyncSequence, Sendable {
    public typealias Element = APIServerSentEvent

    /// The byte stream it parses.
    public let bytes: APIByteStream

    public func makeAsyncIterator() -> Iterator {
        Iterator(bytes: bytes.makeAsyncIterator())
    }

    /// Reads the events in order.
    public struct Iterator: AsyncIteratorProtocol {
        var bytes: APIByteStream.Iterator
        var parser = APIServerSentEventParser()
        var pending: [APIServerSentEvent] = []
        var index = 0

        /// The last event ID seen so far.
        public var lastEventID: String? { parser.lastEventID }
        /// The reconnection time the stream asked for, in milliseconds.
        public var reconnectionTime: Int? { parser.reconnectionTime }

        public mutating func next() async throws -> APIServerSentEvent? {
            while index == pending.count {
                guard let chunk = try await bytes.next() else {
                    parser.finish()
                    return nil
                }
                pending = try parser.parse(chunk)
                index = 0
            }
            index += 1
            return pending[index - 1]
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
        var splitter = APIJSONLinesSplitter()
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
