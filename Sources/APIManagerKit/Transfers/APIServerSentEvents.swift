import Foundation

/// One server-sent event (the WHATWG `text/event-stream` format).
public struct APIServerSentEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event's type: its `event` field, `"message"` when it has none.
    public var type: String
    /// Its `data` lines, joined with line feeds.
    public var data: String
    /// The last event ID when it was dispatched (the stream's, kept from event to event); `nil`
    /// when none was set.
    public var id: String?
    /// The reconnection time the stream asked for (`retry`, milliseconds), as of this event; `nil`
    /// when it has not.
    public var retry: Int?

    /// An event.
    public init(type: String = "message", data: String, id: String? = nil, retry: Int? = nil) {
        self.type = type
        self.data = data
        self.id = id
        self.retry = retry
    }

    public var description: String { "\(type)\(id.map { " #\($0)" } ?? ""): \(data.debugDescription)" }
}

extension APIServerSentEvent {
    /// Parses a `text/event-stream` body as it arrives, chunk by chunk, as the WHATWG HTML standard
    /// says: lines end with CR, LF or CRLF (a CR at the end of a chunk waits for the next); a leading
    /// byte-order mark is skipped; `event`, `data` (lines joined with LF), `id` (without NUL) and
    /// `retry` (digits only, any number of them, saturated at ``maxReconnectionTime``) fields; lines starting with `:` are comments; an event is dispatched at an
    /// empty line, and one without data is not; an event cut by the end of the stream is dropped.
    ///
    /// A line longer than ``maxLineLength`` bytes (1 MiB unless given) or an event whose data passes
    /// ``maxEventLength`` (8 MiB) throws: a server cannot make memory grow without bound.
    public struct Parser: Sendable {
        /// The longest line accepted, in bytes.
        public let maxLineLength: Int
        /// The most data one event may gather, in bytes.
        public let maxEventLength: Int
        /// The stream's last event ID: the last `id` field as of the last dispatched event (an `id` in an
        /// event cut by the end of the stream does not count). Sent back as `Last-Event-ID` on a
        /// reconnection.
        public private(set) var lastEventID: String?
        /// The `id` field being read, which becomes the last event ID when its event is dispatched.
        private var lastEventIDBuffer: String?
        /// The reconnection time the stream asked for, in milliseconds; `nil` when it has not. A `retry`
        /// of any length of digits counts, saturated at ``maxReconnectionTime``.
        public private(set) var reconnectionTime: Int?
        /// The largest reconnection time a `retry` field sets, in milliseconds: 2,147,483,647 (about
        /// 24.8 days, the longest timer a browser sets). ``APIServerSentEvent/Reconnection/maxDelay`` caps the wait.
        public static let maxReconnectionTime = Int(Int32.max)

        private var line: [UInt8] = []
        private var pendingCR = false
        private var sawStart = false
        private var eventType = ""
        private var dataBuffer = ""
        private var hasData = false

        /// A parser; each limit's default is given with its property.
        public init(maxLineLength: Int = 1 << 20, maxEventLength: Int = 8 << 20) {
            self.maxLineLength = maxLineLength
            self.maxEventLength = maxEventLength
        }

        /// The events completed by `chunk`, in order.
        ///
        /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` past a limit.
        public mutating func parse(_ chunk: Data) throws(APIError) -> [APIServerSentEvent] {
            var events: [APIServerSentEvent] = []
            for byte in chunk {
                if !sawStart {
                    // A leading UTF-8 BOM (EF BB BF) is skipped: the first bytes are held until known.
                    line.append(byte)
                    let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
                    if line.count <= 3, Array(bom.prefix(line.count)) == line {
                        if line.count == 3 {
                            line.removeAll()
                            sawStart = true
                        }
                        continue
                    }
                    sawStart = true
                    let held = line
                    line.removeAll()
                    for earlier in held { try take(earlier, into: &events) }
                    continue
                }
                try take(byte, into: &events)
            }
            return events
        }

        /// The stream ended: an event cut by it is dropped (as the standard says); returns nothing, and
        /// resets the parser for a reconnection (the last event ID and reconnection time are kept).
        public mutating func finish() {
            lastEventIDBuffer = lastEventID
            line.removeAll()
            pendingCR = false
            sawStart = false
            eventType = ""
            dataBuffer = ""
            hasData = false
        }

        private mutating func take(_ byte: UInt8, into events: inout [APIServerSentEvent]) throws(APIError) {
            if pendingCR {
                pendingCR = false
                if byte == 0x0A { return }  // the LF of a CRLF
            }
            switch byte {
            case 0x0D:
                pendingCR = true
                try endLine(into: &events)
            case 0x0A:
                try endLine(into: &events)
            default:
                guard line.count < maxLineLength else {
                    throw .invalidRequest(reason: "a server-sent event line is longer than \(maxLineLength) bytes")
                }
                line.append(byte)
            }
        }

        private mutating func endLine(into events: inout [APIServerSentEvent]) throws(APIError) {
            defer { line.removeAll(keepingCapacity: true) }
            if line.isEmpty {
                dispatch(into: &events)
                return
            }
            if line[0] == UInt8(ascii: ":") { return }  // a comment
            let name: String
            var value: ArraySlice<UInt8>
            if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                name = String(decoding: line[..<colon], as: UTF8.self)
                value = line[(colon + 1)...]
                if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
            } else {
                name = String(decoding: line, as: UTF8.self)
                value = []
            }
            switch name {
            case "event":
                eventType = String(decoding: value, as: UTF8.self)
            case "data":
                guard dataBuffer.utf8.count + value.count < maxEventLength else {
                    throw .invalidRequest(reason: "a server-sent event has more than \(maxEventLength) bytes of data")
                }
                dataBuffer += String(decoding: value, as: UTF8.self)
                dataBuffer += "\n"
                hasData = true
            case "id":
                if !value.contains(0) { lastEventIDBuffer = String(decoding: value, as: UTF8.self) }
            case "retry":
                // Any run of ASCII digits (HTML §9.2.6), saturated at the maximum.
                if !value.isEmpty, value.allSatisfy({ (0x30...0x39).contains($0) }) {
                    var milliseconds = 0
                    for digit in value {
                        milliseconds = min(Self.maxReconnectionTime, milliseconds * 10 + Int(digit - 0x30))
                    }
                    reconnectionTime = milliseconds
                }
            default:
                break  // unknown fields are ignored
            }
        }

        private mutating func dispatch(into events: inout [APIServerSentEvent]) {
            defer {
                eventType = ""
                dataBuffer = ""
                hasData = false
            }
            lastEventID = lastEventIDBuffer
            guard hasData else { return }
            var data = dataBuffer
            if data.hasSuffix("\n") { data.removeLast() }
            events.append(
                APIServerSentEvent(
                    type: eventType.isEmpty ? "message" : eventType, data: data,
                    id: lastEventID.flatMap { $0.isEmpty ? nil : $0 }, retry: reconnectionTime))
        }
    }
}

extension APIByteStream {
    /// Splits a JSON Lines (NDJSON) body into its lines as it arrives, chunk by chunk: lines end with LF
    /// (a CR before it is dropped); blank lines are skipped; the last line needs no LF. Each line is
    /// one JSON value, for the caller to decode. A line longer than ``maxLineLength`` bytes (8 MiB unless
    /// given) throws.
    public struct JSONLinesSplitter: Sendable {
        /// The longest line accepted, in bytes.
        public let maxLineLength: Int
        private var line = Data()

        /// A splitter; the limit's default is given with its property.
        public init(maxLineLength: Int = 8 << 20) {
            self.maxLineLength = maxLineLength
        }

        /// The lines completed by `chunk`, in order.
        public mutating func split(_ chunk: Data) throws(APIError) -> [Data] {
            var lines: [Data] = []
            var start = chunk.startIndex
            while let newline = chunk[start...].firstIndex(of: 0x0A) {
                try append(chunk[start..<newline])
                if let finished = takeLine() { lines.append(finished) }
                start = chunk.index(after: newline)
            }
            try append(chunk[start...])
            return lines
        }

        /// The stream ended: the last line, if it had no LF.
        public mutating func finish() -> [Data] {
            takeLine().map { [$0] } ?? []
        }

        private mutating func append(_ bytes: Data) throws(APIError) {
            guard line.count + bytes.count <= maxLineLength else {
                throw .invalidRequest(reason: "a JSON Lines line is longer than \(maxLineLength) bytes")
            }
            line.append(bytes)
        }

        private mutating func takeLine() -> Data? {
            defer { line = Data() }
            var finished = line
            if finished.last == 0x0D { finished.removeLast() }
            let blank = finished.allSatisfy { $0 == 0x20 || $0 == 0x09 }
            return blank ? nil : finished
        }
    }
}
