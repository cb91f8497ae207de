// Streamed responses (issue 21, item 6): bytes as they arrive with backpressure, server-sent events
// and JSON Lines, on the mock transport's staged replies and a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Streamed responses", .timeLimit(.minutes(1)))
struct StreamingTests {
    struct FeedRequest: APIRequest {
        var url = testBaseURL
        var path = "/feed"
        var retryPolicy: APIRetryPolicy?
        var concurrencyScope: String?
        var concurrencyPolicy: APIConcurrencyPolicy = .default
        var cacheOption: APIResponseCache.Option = .networkOnly
    }

    final class Feed: APIManager {
        typealias Request = FeedRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private func make(
        _ replies: MockTransport.Reply..., transport: (any APITransport)? = nil
    ) -> (TestClock, MockTransport, Feed, EventRecorder) {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/feed", replies: replies)
        let feed = Feed(
            engine: APIEngine(transport: transport ?? mock, clock: clock, delivery: .inline, execution: .inline))
        let recorder = EventRecorder()
        feed.delegate = recorder
        return (clock, mock, feed, recorder)
    }

    private static let body = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0) })

    private func collect(_ stream: APIByteStream) async throws -> [Data] {
        var chunks: [Data] = []
        for try await chunk in stream { chunks.append(chunk) }
        return chunks
    }

    @Test(arguments: [nil, "feed"] as [String?])
    func theBodyArrivesInItsPartsThenTheTaskFinishes(scope: String?) async throws {
        let (clock, _, feed, recorder) = make(.status(200, body: Self.body).after(0.1).inChunks(4, every: 0.5))
        let stream = feed.bytes(for: FeedRequest(concurrencyScope: scope))
        clock.advance(by: 5)
        let chunks = try await collect(stream)
        #expect(chunks.map(\.count) == [250, 250, 250, 250])
        #expect(chunks.reduce(into: Data()) { $0.append($1) } == Self.body)
        #expect(stream.task.state.name == "finished")
        #expect(recorder.events(of: stream.task) == ["start 1", "finished"])
    }

    @Test func aSlowConsumerHoldsTheTransportBackInsteadOfBuffering() async throws {
        let big = Data(count: 10 << 20)
        let (clock, mock, feed, _) = make(.status(200, body: big).inChunks(10, every: 0))
        let stream = feed.bytes(for: FeedRequest())
        clock.advance(by: 1)
        #expect(stream.buffer.heldBytes <= APIResponseBodyStream.highWater + (1 << 20), "bounded")
        #expect(mock.records.first?.outcome == .pending, "the transport waits for the consumer")
        var total = 0
        for try await chunk in stream { total += chunk.count }
        #expect(total == big.count)
        #expect(stream.task.state.name == "finished")
    }

    @Test func anErrorStatusFailsTheStreamBeforeAnyPart() async {
        let (clock, _, feed, _) = make(.json(#"{"message":"nope"}"#, status: 404))
        let stream = feed.bytes(for: FeedRequest())
        clock.advance(by: 1)
        await #expect {
            _ = try await collect(stream)
        } throws: { error in
            (error as? APIError)?.statusCode == 404
        }
    }

    @Test func aFailureBeforeAnyPartIsRetried() async throws {
        let (clock, mock, feed, _) = make(.failure(.networkConnectionLost), .status(200, body: Self.body))
        let stream = feed.bytes(
            for: FeedRequest(retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock.advance(by: 2)
        #expect(try await collect(stream).reduce(into: Data()) { $0.append($1) } == Self.body)
        #expect(mock.records.count == 2)
    }

    @Test func aFailureAfterPartsIsNotRetriedAndTheStreamThrows() async throws {
        let (clock, mock, feed, _) = make(.status(200, body: Self.body).inChunks(4, every: 1).cut(after: 500))
        let stream = feed.bytes(
            for: FeedRequest(retryPolicy: APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none)))
        clock.advance(by: 10)
        var received = 0
        await #expect(throws: APIError.self) {
            for try await chunk in stream { received += chunk.count }
        }
        #expect(received == 500, "the parts that came, once")
        #expect(mock.records.count == 1, "not retried: the consumer has part of the body")
    }

    @Test func breakingOutOfTheLoopCancelsTheTask() async throws {
        let (clock, mock, feed, _) = make(.status(200, body: Self.body).inChunks(4, every: 1))
        let stream = feed.bytes(for: FeedRequest())
        clock.advance(by: 0.5)
        for try await _ in stream { break }
        #expect(stream.task.state.name == "cancelled(concurrency)")
        #expect(mock.records.first?.outcome == .cancelled)
    }

    @Test func cancellingTheTaskFromAnotherThreadEndsTheStream() async {
        let (_, _, feed, _) = make(MockTransport.Reply.status(200, body: Self.body).held())
        let stream = feed.bytes(for: FeedRequest())
        let task = stream.task
        async let cancelled: Void = Task.detached { task.cancel() }.value
        await #expect {
            _ = try await collect(stream)
        } throws: { error in
            (error as? APIError)?.isCancellation == true
        }
        await cancelled
    }

    @Test(arguments: [nil, "feed"] as [String?])
    func aCancelledStreamEndsWithTheCancellationEvenWhenTheTransportAnswersWithSuccess(scope: String?) async throws {
        let transport = HeldSinkTransport()
        // Events wait on a suspended queue, as they would behind a busy main queue.
        let events = DispatchQueue(label: "events")
        events.suspend()
        let feed = Feed(engine: APIEngine(transport: transport, delivery: .queue(events), execution: .inline))
        let stream = feed.bytes(for: FeedRequest(concurrencyScope: scope))
        let body = try #require(transport.stream)
        #expect(body.begin(statusCode: 200, headers: [:]))
        _ = body.write(Self.body.prefix(300)) {}
        stream.task.cancel()
        _ = body.write(Self.body.suffix(from: 300)) {}
        transport.completion?(.success(APIRawResponse(statusCode: 200)))
        events.resume()
        var received = Data()
        await #expect {
            for try await chunk in stream { received.append(chunk) }
        } throws: { error in
            (error as? APIError)?.isCancellation == true
        }
        #expect(received == Self.body.prefix(300), "nothing written after the cancellation reaches the consumer")
    }

    @Test func aTransportThatDoesNotStreamGivesTheBodyWhole() async throws {
        struct WholeTransport: APITransport {
            func send(
                _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
            )
                -> any APICancellable
            {
                completion(.success(APIRawResponse(statusCode: 200, body: StreamingTests.body)))
                return NothingToCancel()
            }
        }
        let (_, _, feed, _) = make(.status(200), transport: WholeTransport())
        #expect(try await collect(feed.bytes(for: FeedRequest())) == [Self.body])
    }

    /// 40 parts of 1 MiB, each part's bytes its own index, so order shows.
    private static let parts = (0..<40).map { Data(repeating: UInt8($0), count: 1 << 20) }

    @Test func aTransportThatDoesNotWaitSpillsPastTheMemoryLimitAndNothingIsLostOrReordered() async throws {
        let buffer = StreamBuffer()
        let stream = APIResponseBodyStream(buffer: buffer)
        #expect(stream.begin(statusCode: 200, headers: [:]))
        let readyCalls = LockedState(0)
        for part in Self.parts {
            // As URLSession on Linux: told to wait, it writes on.
            _ = stream.write(part) { readyCalls.withLock { $0 += 1 } }
        }
        #expect(buffer.heldBytes <= APIResponseBodyStream.memoryLimit, "memory bounded: \(buffer.heldBytes)")
        #expect(buffer.spilledBytes == Int64(40 << 20) - Int64(buffer.heldBytes), "the rest waits on disk")
        buffer.finish(.success(()))
        var received = Data()
        while let chunk = try await buffer.next() { received.append(chunk) }
        #expect(
            received == Self.parts.reduce(into: Data()) { $0.append($1) }, "every byte, in order, the end after them")
        #expect(buffer.spilledBytes == 0)
        #expect(readyCalls.withLock { $0 } == 1, "the transport was told once to go on")
    }

    @Test func partsArrivingWhileTheOverflowDrainsQueueBehindIt() async throws {
        let buffer = StreamBuffer()
        let stream = APIResponseBodyStream(buffer: buffer)
        _ = stream.begin(statusCode: 200, headers: [:])
        for part in Self.parts[0..<20] { _ = stream.write(part) {} }
        var received = Data()
        // Read past memory into the overflow, then more parts come.
        for _ in 0..<12 { received.append(try await buffer.next() ?? Data()) }
        #expect(buffer.spilledBytes > 0)
        for part in Self.parts[20...] { _ = stream.write(part) {} }
        buffer.finish(.success(()))
        while let chunk = try await buffer.next() { received.append(chunk) }
        #expect(received == Self.parts.reduce(into: Data()) { $0.append($1) })
    }

    @Test func smallPartsSpilledAndReadBetweenWritesKeepTheirOrder() async throws {
        let buffer = StreamBuffer()
        let stream = APIResponseBodyStream(buffer: buffer)
        _ = stream.begin(statusCode: 200, headers: [:])
        // 16 KiB parts, as URLSession hands them over, each stamped with its index.
        let parts = (0..<1210).map { index in
            var part = Data(repeating: UInt8(truncatingIfNeeded: index), count: 16 << 10)
            withUnsafeBytes(of: UInt32(index).bigEndian) { part.replaceSubrange(0..<4, with: $0) }
            return part
        }
        var received = Data()
        for part in parts[..<901] { _ = stream.write(part) {} }
        // The consumer drains memory and reads into the overflow, part of which is still pending.
        while received.count < 600 << 14 { received.append(try await buffer.next() ?? Data()) }
        #expect(buffer.spilledBytes > 0)
        for part in parts[901...] { _ = stream.write(part) {} }
        buffer.finish(.success(()))
        while let chunk = try await buffer.next() { received.append(chunk) }
        #expect(received == parts.reduce(into: Data()) { $0.append($1) })
    }

    /// A long stream whose consumer falls behind now and then: the overflow file keeps only what is
    /// unread, not every byte that ever waited there.
    @Test func theOverflowFileIsEmptiedOnceItsPartsAreRead() async throws {
        let buffer = StreamBuffer()
        let stream = APIResponseBodyStream(buffer: buffer)
        _ = stream.begin(statusCode: 200, headers: [:])
        var received = Data()
        for round in 0..<3 {
            let parts = Self.parts[(round * 12)..<(round * 12 + 12)]
            for part in parts { _ = stream.write(part) {} }
            #expect(buffer.spilledBytes > 0, "round \(round): past the memory limit, parts wait on disk")
            let size = buffer.spillFileSize
            #expect(size > 0 && size <= buffer.spilledBytes, "round \(round): only the unread parts: \(size)")
            while received.count < (round + 1) * 12 << 20 { received.append(try await buffer.next() ?? Data()) }
            #expect(buffer.spillFileSize == 0, "round \(round): read, the file is emptied")
        }
        buffer.finish(.success(()))
        #expect(try await buffer.next() == nil)
        #expect(received == Self.parts[0..<36].reduce(into: Data()) { $0.append($1) }, "every byte, in order")
    }

    @Test func aStreamFailingWithPartsOnDiskGivesThemBeforeTheError() async throws {
        let buffer = StreamBuffer()
        let stream = APIResponseBodyStream(buffer: buffer)
        _ = stream.begin(statusCode: 200, headers: [:])
        for part in Self.parts[0..<12] { _ = stream.write(part) {} }
        buffer.finish(.failure(.transport(underlying: URLError(.networkConnectionLost))))
        var received = 0
        await #expect(throws: APIError.self) {
            while let chunk = try await buffer.next() { received += chunk.count }
        }
        #expect(received == 12 << 20)
    }

    @Test func aManagerOnATransportThatDoesNotWaitStreamsEveryByteInBoundedMemory() async throws {
        /// Writes the whole body at once and ignores every request to wait.
        struct EagerTransport: OptionsTransport {
            func send(
                _ request: URLRequest, options: APITransportOptions,
                completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
            ) -> any APICancellable {
                DispatchQueue.global().async {
                    let stream = options.responseBody as? APIResponseBodyStream
                    _ = stream?.begin(statusCode: 200, headers: [:])
                    for part in StreamingTests.parts { _ = stream?.write(part) {} }
                    completion(.success(APIRawResponse(statusCode: 200)))
                }
                return NothingToCancel()
            }
        }
        let (_, _, feed, _) = make(.status(200), transport: EagerTransport())
        let stream = feed.bytes(for: FeedRequest())
        var received = Data()
        var mostHeld = 0
        for try await chunk in stream {
            received.append(chunk)
            mostHeld = max(mostHeld, stream.bufferedBytes)
        }
        #expect(received == Self.parts.reduce(into: Data()) { $0.append($1) })
        #expect(mostHeld <= APIResponseBodyStream.memoryLimit)
        #expect(stream.task.state.name == "finished")
    }

    static let eventStream = ["Content-Type": "text/event-stream"]

    @Test func serverSentEventsArriveAsTheyAreComplete() async throws {
        let text = "retry: 3000\nid: 1\ndata: hello\n\n: keep-alive\nevent: update\nid: 2\ndata: {\"n\":2}\n\ndata: cut"
        let (clock, _, feed, _) = make(
            .status(200, headers: Self.eventStream, body: Data(text.utf8)).inChunks(7, every: 0.1))
        let events = feed.events(for: FeedRequest())
        clock.advance(by: 1)
        var iterator = events.makeAsyncIterator()
        var seen: [APIServerSentEvent] = []
        while let event = try await iterator.next() { seen.append(event) }
        #expect(
            seen == [
                APIServerSentEvent(data: "hello", id: "1", retry: 3000),
                APIServerSentEvent(type: "update", data: #"{"n":2}"#, id: "2", retry: 3000),
            ])
        #expect(iterator.lastEventID == "2")
        #expect(iterator.reconnectionTime == 3000)
    }

    struct Message: Decodable, Equatable, Sendable {
        let n: Int
    }

    @Test func jsonLinesAreDecodedOneByOne() async throws {
        let text = "{\"n\":1}\n{\"n\":2}\r\n\n{\"n\":3}"
        let (clock, _, feed, _) = make(.status(200, body: Data(text.utf8)).inChunks(5, every: 0.1))
        let lines = feed.lines(for: FeedRequest(), as: Message.self)
        clock.advance(by: 1)
        var seen: [Message] = []
        for try await message in lines { seen.append(message) }
        #expect(seen == [Message(n: 1), Message(n: 2), Message(n: 3)])
    }

    @Test func aLineThatDoesNotDecodeEndsTheStreamAndCancelsTheTask() async {
        let (clock, _, feed, _) = make(
            MockTransport.Reply.status(200, body: Data("{\"n\":1}\nbad\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n".utf8))
                .inChunks(2, every: 1))
        let lines = feed.lines(for: FeedRequest(), as: Message.self)
        clock.advance(by: 0.5)  // the first half, with the line that does not decode
        var seen: [Message] = []
        await #expect {
            for try await message in lines { seen.append(message) }
        } throws: { error in
            if case .decoding? = error as? APIError { return true }
            return false
        }
        #expect(seen == [Message(n: 1)])
        #expect(lines.bytes.task.state.name == "cancelled(concurrency)")
    }

    @Test func aStreamedTaskKeepsItsPolicy() async throws {
        let (clock, mock, feed, _) = make(.status(200, body: Self.body).after(1))
        let first = feed.bytes(for: FeedRequest(concurrencyPolicy: .cancelOthers))
        let second = feed.bytes(for: FeedRequest(concurrencyPolicy: .cancelOthers))
        clock.advance(by: 2)
        #expect(first.task.state.name == "cancelled(policy)")
        #expect(try await collect(second).reduce(into: Data()) { $0.append($1) } == Self.body)
        #expect(mock.records.count == 2)
    }

    // MARK: Reconnecting event streams

    @Test(arguments: [nil, "feed"] as [String?])
    func aDroppedEventStreamReconnectsWithLastEventIDAfterTheServersRetry(scope: String?) async throws {
        let (clock, mock, feed, _) = make(.status(200, headers: Self.eventStream))
        mock.stub(nil, "/feed") { request in
            switch request.value(forHTTPHeaderField: "Last-Event-ID") {
            case nil:
                let text = "retry: 2000\nid: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: lo"
                return MockTransport.Reply.status(200, headers: Self.eventStream, body: Data(text.utf8)).inChunks(
                    3, every: 0.5
                ).cut(after: 45)
            case "2"?:
                return .status(200, headers: Self.eventStream, body: Data("id: 3\ndata: c\n\n".utf8))
            default:
                return .status(204)
            }
        }
        let events = feed.events(
            for: FeedRequest(concurrencyScope: scope), reconnection: APIServerSentEvent.Reconnection(delay: 9))
        let (seen, error) = await drainEvents(events, clock: clock)
        #expect(error == nil)
        #expect(seen == ["1:a", "2:b", "3:c"])
        #expect(
            mock.records.map { $0.request.value(forHTTPHeaderField: "Last-Event-ID") ?? "-" } == ["-", "2", "3"],
            "the cut event 3 is dropped and asked for again; a 204 ends the stream")
        let reconnectedAt = mock.records.dropFirst().first?.sentAt ?? 0
        let droppedAt = mock.records.first?.endedAt ?? 0
        #expect(abs(reconnectedAt - droppedAt - 2) < 0.3, "after the server's retry, not the default delay")
    }

    /// One event, then a drop; the server asks for a reconnection in a day.
    private static let parkingFeed = MockTransport.Reply.status(
        200, headers: eventStream, body: Data("retry: 86400000\nid: 1\ndata: a\n\ndata: b".utf8)
    ).inChunks(2, every: 1).cut(after: 35)

    @Test(arguments: [nil, "feed"] as [String?])
    func aServersRetryIsCappedByTheReconnectionsLongestDelay(scope: String?) async throws {
        let (clock, mock, feed, _) = make(Self.parkingFeed, .status(204))
        let events = feed.events(
            for: FeedRequest(concurrencyScope: scope),
            reconnection: APIServerSentEvent.Reconnection(delay: 1, maxDelay: 5))
        let (seen, error) = await drainEvents(events, clock: clock)
        #expect(error == nil)
        #expect(seen == ["1:a"])
        #expect(mock.records.count == 2, "reconnected, then the 204 ended it")
        let reconnectedAt = mock.records.dropFirst().first?.sentAt ?? 0
        let droppedAt = mock.records.first?.endedAt ?? 0
        #expect(abs(reconnectedAt - droppedAt - 5) < 0.3, "after maxDelay, not a day: \(reconnectedAt - droppedAt)")
        #expect(APIServerSentEvent.Reconnection().maxDelay == 60)
    }

    @Test func cancellingTheConsumerEndsTheWaitForAReconnectionAtOnce() async throws {
        let (clock, mock, feed, _) = make(Self.parkingFeed)
        let events = feed.events(for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(maxDelay: 3600))
        let consumer = Task {
            var seen: [String] = []
            for try await event in events { seen.append(event.data) }
            return seen
        }
        // Until the drop: the consumer then waits for its reconnection on the clock's one timer.
        for _ in 0..<20_000 where !(mock.records.first?.endedAt != nil && clock.pendingTimerCount == 1) {
            await Task.yield()
            clock.advance(by: 0.25)
        }
        #expect(clock.pendingTimerCount == 1, "the reconnection's timer")
        consumer.cancel()
        for _ in 0..<20_000 where clock.pendingTimerCount > 0 { await Task.yield() }
        let endedAtOnce = clock.pendingTimerCount == 0
        if !endedAtOnce { clock.advance(by: 3600) }  // a wait that ignored the cancellation goes, the test ends
        #expect(endedAtOnce, "the wait ended on the cancellation, its timer cancelled")
        await #expect(throws: CancellationError.self) { _ = try await consumer.value }
        #expect(mock.records.count == 1, "no reconnection sent")
    }

    @Test func withoutAReconnectionADropEndsTheStreamWithItsError() async {
        let (clock, mock, feed, _) = make(
            MockTransport.Reply.status(200, headers: Self.eventStream, body: Data("id: 1\ndata: a\n\ndata: b".utf8))
                .inChunks(2, every: 1)
                .cut(after: 20))
        let (seen, error) = await drainEvents(feed.events(for: FeedRequest()), clock: clock)
        #expect(seen == ["1:a"])
        #expect((error as? APIError).map(describe) == "transport(\(URLError.Code.networkConnectionLost.rawValue))")
        #expect(mock.records.count == 1)
    }

    @Test func anErrorStatusIsNotReconnectedAndReconnectionsAreBounded() async {
        let (clock, mock, feed, _) = make(
            .status(200, headers: Self.eventStream, body: Data("data: x\n\n".utf8)), .json("{}", status: 500))
        let (seen, error) = await drainEvents(
            feed.events(for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(maxAttempts: 3, delay: 1)),
            clock: clock)
        #expect(seen == ["-:x"])
        #expect((error as? APIError)?.statusCode == 500)
        #expect(mock.records.count == 2)

        let (quietClock, quiet, quietFeed, _) = make(.status(200, headers: Self.eventStream))
        let (none, end) = await drainEvents(
            quietFeed.events(
                for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(maxAttempts: 3, delay: 1)),
            clock: quietClock)
        #expect(none.isEmpty && end == nil)
        #expect(quiet.records.count == 4, "the first request and three reconnections without an event")
    }
}
