import Foundation

/// A `multipart/form-data` body (RFC 7578): text fields and files, in the order appended.
///
/// A request whose body parameters hold an ``APIValue/file(_:)`` gets one on its own; build one
/// yourself for full control and give it as the request's ``APIRequest/body`` with
/// ``APIRequestBody/multipart(_:inMemoryLimit:)``.
///
/// ```swift
/// var form = APIMultipartFormData()
/// try form.append("Sunset", name: "caption")
/// try form.append(APIFile(url: photoURL), name: "photo")
/// ```
///
/// Names and file names with CR, LF, a double quote or another control character are refused
/// (``APIError/invalidRequest(reason:underlying:)``): they could forge part headers. A file name
/// outside ASCII is percent-encoded as UTF-8 (RFC 7578, section 4.2), `%` included. The boundary,
/// quoted in ``contentType`` when it is not a token, is random unless
/// given, and checked against every byte of the content as it is written: a random boundary found in
/// the content is replaced by a new one and the body written again; a given one fails the request.
public struct APIMultipartFormData: Sendable, Hashable {
    /// One part: a text field or a file.
    public enum Part: Sendable, Hashable {
        /// A text field: its name and value.
        case text(name: String, value: String)
        /// A file: its field name and the file.
        case file(name: String, APIFile)
    }

    /// The parts, in order.
    public private(set) var parts: [Part] = []
    /// The boundary between parts (random unless given).
    public private(set) var boundary: String
    private let boundaryIsRandom: Bool

    /// An empty form with a random boundary.
    public init() {
        boundary = Self.randomBoundary()
        boundaryIsRandom = true
    }

    /// An empty form with the given boundary (1 to 70 characters of RFC 2046's set, not ending with
    /// a space).
    public init(boundary: String) throws(APIError) {
        try Self.validate(boundary: boundary)
        self.boundary = boundary
        boundaryIsRandom = false
    }

    /// The form of body parameters: nested objects named `a[b]` and arrays as `encoding` says (as
    /// the form encoder names them), files as file parts, everything else as text.
    public init(parameters: [String: APIValue], encoding: APIParameters.QueryEncoding = .default) throws(APIError) {
        self.init()
        for (name, leaf) in try encoding.leaves(of: parameters) {
            switch leaf {
            case .text(let text): try append(text, name: name)
            case .keyOnly: try append("", name: name)
            case .file(let file): try append(file, name: name)
            }
        }
    }

    /// The `Content-Type` header of the body, with its boundary: as a quoted string when the
    /// boundary has a character RFC 2046 allows but a token does not (space, `(`, `)`, `,`, `/`,
    /// `:`, `=`, `?`: RFC 9110 §5.6.6), else as it is.
    public var contentType: String { "multipart/form-data; boundary=\(Self.parameterValue(boundary))" }

    /// A parameter value as RFC 9110 §5.6.6 writes it: a token as it is, anything else quoted (a
    /// boundary has no `"` or `\` to escape).
    static func parameterValue(_ value: String) -> String {
        let isToken =
            !value.isEmpty
            && value.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    return true
                default:
                    return "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
        return isToken ? value : "\"" + value + "\""
    }

    /// Appends a text field.
    public mutating func append(_ value: String, name: String) throws(APIError) {
        try Self.validate(name, what: "field name")
        parts.append(.text(name: name, value: value))
    }

    /// Appends a file.
    public mutating func append(_ file: APIFile, name: String) throws(APIError) {
        try Self.validate(name, what: "field name")
        if let fileName = file.fileName { try Self.validate(fileName, what: "file name") }
        if let mimeType = file.mimeType { try Self.validate(mimeType, what: "MIME type") }
        parts.append(.file(name: name, file))
    }

    // MARK: Writing

    /// The body's size in bytes, without reading the files (their sizes come from the file system).
    public func contentLength() throws(APIError) -> Int64 {
        var length: Int64 = 0
        for part in parts {
            length += Int64(try header(of: part).count)
            switch part {
            case .text(_, let value): length += Int64(value.utf8.count)
            case .file(_, let file): length += try file.byteCount()
            }
            length += 2  // CRLF
        }
        return length + Int64(closing.count)
    }

    /// The whole body in memory. A random boundary found in the content is replaced first, so read
    /// ``contentType`` after this.
    public mutating func encoded() throws(APIError) -> Data {
        try writingWithFreshBoundaries { (form: Self) throws(APIError) -> Data in
            var data = Data()
            try form.write { (chunk: Data) throws(APIError) in data.append(chunk) }
            return data
        }
    }

    /// Writes the body to a file at `url` (created or replaced; a new file only its owner may read,
    /// `0600`, and a link found at `url` is replaced, never written through), reading files in chunks of 64 KiB:
    /// memory stays bounded whatever the files' sizes. A random boundary found in the content is
    /// replaced first, so read ``contentType`` after this.
    public mutating func write(to url: URL) throws(APIError) {
        try writingWithFreshBoundaries { (form: Self) throws(APIError) in
            // Owner-only, and never through a link planted at `url`: it holds the user's data.
            let handle: FileHandle
            do {
                handle = try OwnerOnlyFile.replace(at: url)
            } catch {
                throw .invalidRequest(
                    reason: "the multipart body cannot be written to \(url.lastPathComponent)", underlying: error)
            }
            defer { try? handle.close() }
            try form.write { (chunk: Data) throws(APIError) in
                do {
                    try handle.write(contentsOf: chunk)
                } catch {
                    throw .invalidRequest(reason: "the multipart body could not be written to disk", underlying: error)
                }
            }
        }
    }

    /// Runs `body` until the boundary is not found in the content; a random boundary is replaced up
    /// to three times, a given one fails at once.
    private mutating func writingWithFreshBoundaries<Value>(
        _ body: (Self) throws(APIError) -> Value
    ) throws(APIError) -> Value {
        var tries = 0
        while true {
            do {
                return try body(self)
            } catch let error where error.isBoundaryCollision {
                tries += 1
                guard boundaryIsRandom, tries < 4 else {
                    throw .invalidRequest(reason: "the multipart boundary \"\(boundary)\" occurs in the content")
                }
                boundary = Self.randomBoundary()
            }
        }
    }

    /// Writes the body, chunk by chunk, checking that the delimiter never occurs in the content;
    /// the boundary stays (its collision is thrown).
    func writeParts(to sink: (Data) throws -> Void) throws {
        var sinkError: (any Error)?
        do {
            try write { (chunk: Data) throws(APIError) in
                do {
                    try sink(chunk)
                } catch {
                    sinkError = error
                    throw .invalidRequest(reason: "the multipart body could not be sent", underlying: error)
                }
            }
        } catch {
            // The sink's own error as it was (a cancelled connection), else the writer's.
            if let sinkError { throw sinkError }
            if error.isBoundaryCollision {
                throw APIError.invalidRequest(reason: "the multipart boundary \"\(boundary)\" occurs in the content")
            }
            throw error
        }
    }

    /// Writes the body, chunk by chunk, checking that the delimiter never occurs in the content.
    private func write(_ sink: (Data) throws(APIError) -> Void) throws(APIError) {
        let delimiter = Data("--\(boundary)".utf8)
        for part in parts {
            try sink(try header(of: part))
            var scanner = DelimiterScanner(delimiter: delimiter)
            switch part {
            case .text(_, let value):
                let data = Data(value.utf8)
                try scanner.check(data)
                try sink(data)
            case .file(_, let file):
                switch file.content {
                case .data(let data):
                    try scanner.check(data)
                    try sink(data)
                case .file(let url):
                    try FileSource.chunks(of: url) { (chunk: Data) throws(APIError) in
                        try scanner.check(chunk)
                        try sink(chunk)
                    }
                }
            }
            try sink(Data("\r\n".utf8))
        }
        try sink(closing)
    }

    private var closing: Data { Data("--\(boundary)--\r\n".utf8) }

    private func header(of part: Part) throws(APIError) -> Data {
        var text = "--\(boundary)\r\n"
        switch part {
        case .text(let name, _):
            text += "Content-Disposition: form-data; name=\"\(name)\"\r\n\r\n"
        case .file(let name, let file):
            text += "Content-Disposition: form-data; name=\"\(name)\""
            if let fileName = file.fileName { text += "; filename=\"\(Self.encodedFileName(fileName))\"" }
            text += "\r\nContent-Type: \(try file.resolvedMIMEType())\r\n\r\n"
        }
        return Data(text.utf8)
    }

    // MARK: Rules

    /// A file name as RFC 7578 section 4.2 allows: bytes outside ASCII percent-encoded as UTF-8, and
    /// then `%` too (`é%41.txt` goes as `%C3%A9%2541.txt`, which decodes back to itself); a name
    /// all in ASCII goes as it is.
    static func encodedFileName(_ name: String) -> String {
        guard name.utf8.contains(where: { $0 >= 0x80 }) else { return name }
        var encoded = ""
        for byte in name.utf8 {
            if byte == UInt8(ascii: "%") {
                encoded += "%25"
            } else if byte < 0x80 {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    private static func validate(_ text: String, what: String) throws(APIError) {
        if text.unicodeScalars.contains(where: { $0 == "\"" || $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalidRequest(
                reason: "the multipart \(what) \(text.debugDescription) contains CR, LF, a double quote or "
                    + "another control character")
        }
    }

    /// RFC 2046's boundary characters, 1 to 70 of them, not ending with a space.
    private static func validate(boundary: String) throws(APIError) {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'()+_,-./:=? ")
        guard (1...70).contains(boundary.count), boundary.allSatisfy(allowed.contains), boundary.last != " " else {
            throw .invalidRequest(reason: "\(boundary.debugDescription) is not a valid multipart boundary")
        }
    }

    private static func randomBoundary() -> String {
        let characters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return "APIManagerKit-" + String((0..<24).map { _ in characters.randomElement() ?? "x" })
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.parts == rhs.parts && lhs.boundary == rhs.boundary }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(parts)
        hasher.combine(boundary)
    }
}

private struct BoundaryCollision: Error {}

/// Finds a delimiter in content written chunk by chunk (it may span two chunks).
struct DelimiterScanner {
    let delimiter: Data
    /// The last `delimiter.count - 1` bytes checked: a delimiter may straddle two chunks.
    private var tail = Data()

    init(delimiter: Data) { self.delimiter = delimiter }

    mutating func check(_ chunk: Data) throws(APIError) {
        let keep = delimiter.count - 1
        if !tail.isEmpty {
            var seam = tail
            seam.append(chunk.prefix(keep))
            if Self.contains(seam, delimiter) { throw .boundaryCollision }
        }
        if Self.contains(chunk, delimiter) { throw .boundaryCollision }
        if chunk.count >= keep {
            tail = chunk.suffix(keep)
        } else {
            tail.append(chunk)
            tail = tail.suffix(keep)
        }
    }

    /// Whether `needle` occurs in `haystack`: `memchr` to each candidate first byte, then `memcmp`
    /// (Foundation's `range(of:)` compared byte by byte, the slowest step of a 1 GiB form).
    static func contains(_ haystack: Data, _ needle: Data) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return haystack.withUnsafeBytes { (hay: UnsafeRawBufferPointer) -> Bool in
            needle.withUnsafeBytes { (pattern: UnsafeRawBufferPointer) -> Bool in
                guard let hayStart = hay.baseAddress, let patternStart = pattern.baseAddress else { return false }
                let first = Int32(pattern[0])
                let last = hayStart + (hay.count - pattern.count)  // the last place a match can start
                var cursor = hayStart
                while cursor <= last {
                    guard let found = memchr(cursor, first, last - cursor + 1) else { return false }
                    if memcmp(found, patternStart, pattern.count) == 0 { return true }
                    cursor = UnsafeRawPointer(found) + 1
                }
                return false
            }
        }
    }
}

extension APIError {
    /// The multipart boundary occurs in the content: caught by the writer, which picks another.
    fileprivate static var boundaryCollision: APIError {
        .invalidRequest(reason: "the multipart boundary occurs in the content", underlying: BoundaryCollision())
    }

    fileprivate var isBoundaryCollision: Bool {
        if case .invalidRequest(_, let underlying) = self { return underlying is BoundaryCollision }
        return false
    }
}

extension FileSource {
    /// Reads a file in chunks of 1 MiB, handing each to `body`.
    static func chunks(of url: URL, _ body: (Data) throws(APIError) -> Void) throws(APIError) {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw unreadable(url, error)
        }
        defer { try? handle.close() }
        while true {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            } catch {
                throw unreadable(url, error)
            }
            if chunk.isEmpty { return }
            try body(chunk)
        }
    }
}
