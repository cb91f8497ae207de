// The server-sent events parser and the JSON Lines splitter (issue 21, item 6), alone.
import Foundation
import Testing

@testable import APIManagerKit

@Suite("Server-sent events and JSON Lines")
struct ServerSentEventTests {
    private func parse(_ text: String) throws -> [APIServerSentEvent] {
        var parser = APIServerSentEvent.Parser()
        return try parser.parse(Data(text.utf8))
    }

    @Test func dataLinesJoinAndAnEmptyLineDispatches() throws {
        #expect(try parse("data: YHOO\ndata: +2\ndata: 10\n\n") == [APIServerSentEvent(data: "YHOO\n+2\n10")])
    }

    @Test func theStandardsExampleWithCommentsTypesAndIDs() throws {
        let stream = ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"
        #expect(
            try parse(stream) == [
                APIServerSentEvent(data: "first event", id: "1"), APIServerSentEvent(data: "second event"),
                APIServerSentEvent(data: " third event"),
            ])
        #expect(try parse("event: add\ndata: 73857293\n\n") == [APIServerSentEvent(type: "add", data: "73857293")])
    }

    @Test func anEventWithoutDataIsNotDispatchedButEmptyDataIs() throws {
        #expect(try parse("event: ping\n\n").isEmpty)
        #expect(try parse("data\n\ndata:\ndata\n\n") == [APIServerSentEvent(data: ""), APIServerSentEvent(data: "\n")])
    }

    @Test(arguments: ["\r\n", "\r", "\n"])
    func everyLineEndIsALineEnd(end: String) throws {
        let text = "id: 7\(end)data: a\(end)data: b\(end)\(end)"
        #expect(try parse(text) == [APIServerSentEvent(data: "a\nb", id: "7")])
    }

    @Test func aLeadingByteOrderMarkIsSkippedOnlyAtTheStart() throws {
        #expect(try parse("\u{FEFF}data: x\n\n") == [APIServerSentEvent(data: "x")])
        #expect(try parse("data: \u{FEFF}x\n\n") == [APIServerSentEvent(data: "\u{FEFF}x")])
    }

    @Test func retryTakesDigitsOnlyAndIDsWithNULAreIgnored() throws {
        var parser = APIServerSentEvent.Parser()
        _ = try parser.parse(Data("retry: 2500\nretry: 12x\nid: a\0b\ndata: x\n\n".utf8))
        #expect(parser.reconnectionTime == 2500)
        #expect(parser.lastEventID == nil)
        let events = try parser.parse(Data("id: 42\ndata: y\n\ndata: z\n\n".utf8))
        #expect(events.map(\.id) == ["42", "42"], "the last event ID carries over")
        #expect(events.map(\.retry) == [2500, 2500])
    }

    @Test func anIDCountsOnlyOnceItsEventIsDispatched() throws {
        var parser = APIServerSentEvent.Parser()
        _ = try parser.parse(Data("id: 1\ndata: a\n\nid: 2\ndata: cut".utf8))
        #expect(parser.lastEventID == "1", "event 2 was not dispatched")
        parser.finish()
        #expect(parser.lastEventID == "1")
        #expect(try parser.parse(Data("data: again\n\n".utf8)).map(\.id) == ["1"])
    }

    @Test func anEventCutByTheEndOfTheStreamIsDropped() throws {
        var parser = APIServerSentEvent.Parser()
        #expect(try parser.parse(Data("data: whole\n\ndata: cut".utf8)).count == 1)
        parser.finish()
        #expect(try parser.parse(Data("data: next\n\n".utf8)) == [APIServerSentEvent(data: "next")])
    }

    @Test func anyChunkingGivesTheSameEvents() throws {
        let stream = Data("\u{FEFF}: hi\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\nid: 9\rdata: é\r\rdata:x\n\n".utf8)
        var whole = APIServerSentEvent.Parser()
        let expected = try whole.parse(stream)
        #expect(expected.count == 3)
        for split in 0...stream.count {
            var parser = APIServerSentEvent.Parser()
            let events = try parser.parse(stream.prefix(split)) + parser.parse(stream.dropFirst(split))
            #expect(events == expected, "split at \(split)")
        }
        var byteByByte = APIServerSentEvent.Parser()
        #expect(try stream.flatMap { try byteByByte.parse(Data([$0])) } == expected)
    }

    @Test func linesAndEventsPastTheLimitsThrow() {
        var parser = APIServerSentEvent.Parser(maxLineLength: 16, maxEventLength: 32)
        #expect(throws: APIError.self) { try parser.parse(Data(repeating: 0x61, count: 17)) }
        var second = APIServerSentEvent.Parser(maxLineLength: 16, maxEventLength: 20)
        #expect(throws: APIError.self) { try second.parse(Data("data: 0123456789\ndata: 0123456789\n".utf8)) }
    }

    // MARK: JSON Lines

    @Test func jsonLinesSplitOnLineFeedsWhateverTheChunks() throws {
        let body = Data("{\"a\":1}\r\n\n  \n{\"b\":[2,3]}\n{\"c\":\"x\"}".utf8)
        var whole = APIByteStream.JSONLinesSplitter()
        let expected = try whole.split(body) + whole.finish()
        #expect(expected.map { String(decoding: $0, as: UTF8.self) } == [#"{"a":1}"#, #"{"b":[2,3]}"#, #"{"c":"x"}"#])
        for split in 0...body.count {
            var splitter = APIByteStream.JSONLinesSplitter()
            let lines =
                try splitter.split(body.prefix(split)) + splitter.split(body.dropFirst(split)) + splitter.finish()
            #expect(lines == expected, "split at \(split)")
        }
    }

    @Test func aJSONLineLongerThanTheLimitThrows() {
        var splitter = APIByteStream.JSONLinesSplitter(maxLineLength: 8)
        #expect(throws: APIError.self) { try splitter.split(Data("0123456789".utf8)) }
    }
}
