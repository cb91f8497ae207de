// Event streams as HTML §9.2 says (the corrections issue, items 6–10): only a 200
// text/event-stream is read, an empty last event ID is not sent, any run of digits sets the
// reconnection time, a reconnection never cancels a newer task of its scope, and a typed response
// that does not build ends the loop with its error. On the mock transport and a virtual clock.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Event streams: the standard's rules", .timeLimit(.minutes(1)))
struct EventStreamRulesTests {
    typealias FeedRequest = StreamingTests.FeedRequest
    typealias Feed = StreamingTests.Feed

    /// A response that builds only when the server names its version.
    struct Versioned: APIResponse {
        struct Unversioned: Error {}
        init(from raw: APIRawResponse) throws {
            guard raw.value(forHeader: "X-Version") != nil else { throw Unversioned() }
        }
    }

    final class VersionedFeed: APIManager {
        typealias Request = FeedRequest
        typealias Response = Versioned
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static let eventStream = ["Content-Type": "text/event-stream"]

    private func engine(_ replies: [MockTransport.Reply]) -> (TestClock, MockTransport, APIEngine) {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(nil, "/feed", replies: replies)
        return (clock, mock, APIEngine(transport: mock, clock: clock, delivery: .inline, execution: .inline))
    }

    // MARK: Item 6: only a 200 text/event-stream is read

    @Test(
        arguments: [
            (200, "application/json"), (200, "text/plain"), (200, "text/html; charset=utf-8"), (200, "bogus"),
            (200, nil), (205, "text/event-stream"), (299, "text/event-stream"), (206, "text/event-stream"),
            (200, "text/event-streams"), (200, "text/event-stream-x; a=b"),
        ] as [(Int, String?)])
    func anAnswerThatIsNotAnEventStreamFailsForGoodWithoutReconnecting(status: Int, contentType: String?) async {
        var headers: [String: String] = [:]
        headers["Content-Type"] = contentType
        let reply = MockTransport.Reply.status(status, headers: headers, body: Data("data: x\n\n".utf8))
        let (clock, mock, engine) = self.engine(Array(repeating: reply, count: 10))
        let feed = Feed(engine: engine)
        let events = feed.events(
            for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(maxAttempts: 5, delay: 1))
        let (seen, error) = await drainEvents(events, clock: clock)
        #expect(seen.isEmpty, "no event read from \(status) \(contentType ?? "-")")
        guard case .rejected(let underlying, let response)? = error as? APIError else {
            Issue.record("expected a rejection, got \(String(describing: error))")
            return
        }
        #expect(
            underlying as? APIServerSentEvent.Stream.NotAnEventStream
                == APIServerSentEvent.Stream.NotAnEventStream(statusCode: status, contentType: contentType))
        #expect(response.statusCode == status)
        #expect(mock.records.count == 1, "no reconnection")
        #expect(events.bytes.task.state.name == "rejected", "the task fails with the same error")
    }

    @Test(arguments: ["text/event-stream", "Text/Event-Stream; charset=utf-8", " text/event-stream ;x=y"])
    func anEventStreamIsKnownByItsMediaTypeWhateverItsCaseAndParameters(contentType: String) async {
        let (clock, _, engine) = self.engine([
            .status(200, headers: ["Content-Type": contentType], body: Data("id: 1\ndata: a\n\n".utf8)),
            .status(204),
        ])
        let (seen, error) = await drainEvents(
            Feed(engine: engine).events(for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(delay: 1)),
            clock: clock)
        #expect(error == nil)
        #expect(seen == ["1:a"])
    }

    @Test func anErrorStatusIsStillTheTasksStatusError() async {
        let (clock, mock, engine) = self.engine([.json("{}", status: 503), .json("{}", status: 503)])
        let (_, error) = await drainEvents(
            Feed(engine: engine).events(for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(delay: 1)),
            clock: clock)
        #expect((error as? APIError)?.statusCode == 503)
        #expect(mock.records.count == 1)
    }

    // MARK: Item 7: an empty last event ID is not sent

    @Test(arguments: [nil, "feed"] as [String?])
    func anEmptyLastEventIDIsNotSentOnReconnection(scope: String?) async {
        let (clock, mock, engine) = self.engine([
            MockTransport.Reply.status(
                200, headers: Self.eventStream, body: Data("id: 1\ndata: a\n\nid\ndata: b\n\n".utf8)
            )
            .cut(after: 27),
            .status(200, headers: Self.eventStream, body: Data("id: 5\ndata: c\n\n".utf8)).cut(after: 15),
            .status(204),
        ])
        let (seen, error) = await drainEvents(
            Feed(engine: engine).events(
                for: FeedRequest(concurrencyScope: scope), reconnection: APIServerSentEvent.Reconnection(delay: 1)),
            clock: clock)
        #expect(error == nil)
        #expect(seen == ["1:a", "-:b", "5:c"])
        #expect(
            mock.records.map { $0.request.value(forHTTPHeaderField: "Last-Event-ID") ?? "(none)" }
                == ["(none)", "(none)", "5"], "after `id` with no value the header is left out, not sent empty")
    }

    // MARK: Item 8: any run of digits sets the reconnection time

    @Test(
        arguments: [
            ("retry: 1500\n", 1500), ("retry: 0000000000007\n", 7), ("retry: 9999999999\n", Int(Int32.max)),
            ("retry: 123456789012345678901234567890\n", Int(Int32.max)), ("retry: 2147483647\n", Int(Int32.max)),
            ("retry: 2147483646\n", 2_147_483_646), ("retry: 12a\n", nil), ("retry: -5\n", nil), ("retry:\n", nil),
            ("retry: 1 000\n", nil),
        ] as [(String, Int?)])
    func anyRunOfDigitsSetsTheReconnectionTimeSaturated(field: String, expected: Int?) throws {
        var parser = APIServerSentEvent.Parser()
        _ = try parser.parse(Data(field.utf8))
        #expect(parser.reconnectionTime == expected)
        #expect(APIServerSentEvent.Parser.maxReconnectionTime == 2_147_483_647)
    }

    @Test func aSaturatedRetryWaitsTheReconnectionsLongestDelay() async {
        let (clock, mock, engine) = self.engine([
            MockTransport.Reply.status(
                200, headers: Self.eventStream, body: Data("retry: 99999999999999999999\ndata: a\n\n".utf8)
            ).cut(after: 37),
            .status(204),
        ])
        let (seen, _) = await drainEvents(
            Feed(engine: engine).events(
                for: FeedRequest(), reconnection: APIServerSentEvent.Reconnection(delay: 1, maxDelay: 7)),
            clock: clock)
        #expect(seen == ["-:a"])
        let reconnectedAt = mock.records.dropFirst().first?.sentAt ?? 0
        let droppedAt = mock.records.first?.endedAt ?? 0
        #expect(abs(reconnectedAt - droppedAt - 7) < 0.3, "the server's huge retry, capped at maxDelay")
    }

    // MARK: Item 9: a reconnection never cancels a newer task of its scope

    @Test(arguments: [nil, "feed"] as [String?])
    func aCancelOthersStreamSupersededWhileWaitingToReconnectEndsAndLeavesTheNewerTask(scope: String?) async {
        let clock = TestClock()
        let mock = MockTransport(clock: clock)
        mock.stub(
            nil, "/feed",
            replies: [
                MockTransport.Reply.status(200, headers: Self.eventStream, body: Data("id: 1\ndata: a\n\n".utf8))
                    .cut(after: 15),
                .status(200, body: Data("newer".utf8)).after(30),
            ])
        let feed = Feed(engine: APIEngine(transport: mock, clock: clock, delivery: .inline, execution: .inline))
        let request = FeedRequest(concurrencyScope: scope, concurrencyPolicy: .cancelOthers)
        let events = feed.events(for: request, reconnection: APIServerSentEvent.Reconnection(delay: 5))
        let result = Locked<([String], (any Error)?)?>(nil)
        let consumer = Task {
            var seen: [String] = []
            do {
                for try await event in events { seen.append(event.data) }
                result.withLock { $0 = (seen, nil) }
            } catch {
                result.withLock { $0 = (seen, error) }
            }
        }
        // Until the drop: the stream then waits 5 s for its reconnection.
        // The clock stays still meanwhile: moved while the consumer is slow to see the drop (a busy
        // machine), it would reach the reconnection before the test acts.
        for _ in 0..<200_000 where !(mock.records.first?.endedAt != nil && clock.pendingTimerCount == 1) {
            await Task.yield()
        }
        let newer = feed.send(request)
        // The reconnection's wait ends; the newer task (answered at 30 s) still runs. The clock then
        // moves only a little at a time, and never near 30 s: a consumer slow to take its turn (a
        // busy machine) must find the newer task still running, as a user's would.
        clock.advance(by: 5)
        for step in 0..<80 where result.withLock({ $0 == nil }) {
            for _ in 0..<5_000 where result.withLock({ $0 == nil }) { await Task.yield() }
            if step < 79 { clock.advance(by: 0.25) }
        }
        consumer.cancel()
        let (seen, error) = result.withLock { $0 } ?? ([], nil)
        #expect(seen == ["a"])
        #expect((error as? APIError).map(describe) == "cancelled(policy)", "superseded: \(String(describing: error))")
        #expect(newer.state.name != "cancelled(policy)", "the newer task is not cancelled by the reconnection")
        #expect(mock.records.count == 2, "the stream, then the newer task; no reconnection sent")
        clock.advance(by: 60)
        #expect(newer.state.name == "finished")
    }

    @Test func aCancelOthersStreamReconnectsWhenItsScopeIsIdle() async {
        let (clock, mock, engine) = self.engine([
            MockTransport.Reply.status(200, headers: Self.eventStream, body: Data("id: 1\ndata: a\n\n".utf8))
                .cut(after: 15),
            .status(200, headers: Self.eventStream, body: Data("id: 2\ndata: b\n\n".utf8)).cut(after: 15),
            .status(204),
        ])
        let (seen, error) = await drainEvents(
            Feed(engine: engine).events(
                for: FeedRequest(concurrencyScope: "feed", concurrencyPolicy: .cancelOthers),
                reconnection: APIServerSentEvent.Reconnection(delay: 1)), clock: clock)
        #expect(error == nil)
        #expect(seen == ["1:a", "2:b"])
        #expect(mock.records.count == 3)
    }

    // MARK: Item 10: a typed response that does not build ends the loop with its error

    @Test(arguments: [nil, "feed"] as [String?])
    func aStreamWhoseTypedResponseDoesNotBuildEndsWithThatError(scope: String?) async {
        let (clock, _, engine) = self.engine([
            .status(200, headers: Self.eventStream, body: Data("id: 1\ndata: a\n\n".utf8))
        ])
        let feed = VersionedFeed(engine: engine)
        let events = feed.events(for: FeedRequest(concurrencyScope: scope))
        let (seen, error) = await drainEvents(events, clock: clock)
        #expect(seen == ["1:a"])
        guard case .rejected(let underlying, _)? = error as? APIError else {
            Issue.record("the loop must end with the task's error, got \(String(describing: error))")
            return
        }
        #expect(underlying is Versioned.Unversioned)
        #expect(events.bytes.task.state.name == "rejected")
    }

    @Test func aByteStreamWhoseTypedResponseDoesNotBuildEndsWithThatError() async {
        let (clock, _, engine) = self.engine([.status(200, body: Data("abc".utf8)).inChunks(3, every: 0.1)])
        let stream = VersionedFeed(engine: engine).bytes(for: FeedRequest())
        clock.advance(by: 1)
        var received = Data()
        await #expect(throws: APIError.self) {
            for try await chunk in stream { received.append(chunk) }
        }
        #expect(received == Data("abc".utf8))
    }
}
