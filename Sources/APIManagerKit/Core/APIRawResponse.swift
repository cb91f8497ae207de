import Foundation

/// What a transport received for one attempt: status, headers and body, before any decoding.
public struct APIRawResponse: Sendable, Hashable, Codable {
    /// The HTTP status code.
    public var statusCode: Int
    /// The response body; empty when the server sent none.
    public var body: Data
    /// The URL that answered, after redirects; `nil` when the transport does not know it.
    public var url: URL?
    /// The file the body was written to, for a download (``APIRequest/download``); the ``body`` is
    /// then empty. `nil` otherwise.
    public var fileURL: URL?
    private var headerStorage: HeaderStorage

    /// A response from its parts, as a transport (or a test) makes one.
    public init(statusCode: Int, headers: [String: String] = [:], body: Data = Data(), url: URL? = nil) {
        self.init(statusCode: statusCode, headerStorage: .fields(headers), body: body, url: url)
    }

    /// A response whose headers are kept as the transport received them, in order, repeats
    /// included; the ``headers`` dictionary is built only if someone asks for it, with the values of
    /// a repeated name joined by `", "` (RFC 9110 §5.3). ``value(forHeader:)`` reads the list
    /// directly. For transports whose client gives headers as a list (SwiftNIO's `HTTPHeaders`,
    /// say): most responses are decoded without a header read, and building a dictionary costs
    /// more than the rest of a small response's handling.
    public init(statusCode: Int, headerFields: [(name: String, value: String)], body: Data = Data(), url: URL? = nil) {
        self.init(statusCode: statusCode, headerSource: HeaderFieldList(fields: headerFields), body: body, url: url)
    }

    /// A response whose headers are read from `source` only when asked for: turning a platform
    /// response's headers into a dictionary is a good part of a small request's cost on Linux.
    init(statusCode: Int, headerSource: some APIHeaderSource, body: Data, url: URL?) {
        self.init(statusCode: statusCode, headerStorage: .source(LazyHeaders(headerSource)), body: body, url: url)
    }

    private init(statusCode: Int, headerStorage: HeaderStorage, body: Data, url: URL?) {
        self.statusCode = statusCode
        self.headerStorage = headerStorage
        self.body = body
        self.url = url
    }

    /// The response headers. Look them up with ``value(forHeader:)``, which ignores case.
    public var headers: [String: String] {
        get {
            switch headerStorage {
            case .fields(let fields): return fields
            case .source(let lazy): return lazy.fields
            }
        }
        set { headerStorage = .fields(newValue) }
    }

    /// The value of a header, matched without regard to case (RFC 9110 §5.1).
    public func value(forHeader name: String) -> String? {
        switch headerStorage {
        case .source(let lazy):
            return lazy.source.value(forHeader: name)
        case .fields(let headers):
            if let exact = headers[name] { return exact }
            let lowered = name.lowercased()
            return headers.first { $0.key.lowercased() == lowered }?.value
        }
    }

    /// Every field named `name` (without regard to case), in the order received, each one value as
    /// the server sent it: two `Set-Cookie` fields are two values. A response whose headers are a
    /// dictionary (``init(statusCode:headers:body:url:)``, and `URLSessionTransport`'s: URLSession
    /// joins repeated fields with `", "` before anyone can read them) has one joined value.
    public func values(forHeader name: String) -> [String] {
        switch headerStorage {
        case .source(let lazy):
            if let fields = lazy.source.separateValues(forHeader: name) { return fields }
            return lazy.source.value(forHeader: name).map { [$0] } ?? []
        case .fields:
            return value(forHeader: name).map { [$0] } ?? []
        }
    }

    /// The `Set-Cookie` fields, one cookie each (RFC 6265 §3): as received from a transport that
    /// keeps fields apart; from one that joins them (URLSession), split where a join can be told
    /// apart from a cookie's own text (see ``CookieRules/splitJoined(_:)``).
    var setCookieFields: [String] {
        if case .source(let lazy) = headerStorage, let fields = lazy.source.separateValues(forHeader: "Set-Cookie") {
            return fields
        }
        return value(forHeader: "Set-Cookie").map(CookieRules.splitJoined) ?? []
    }

    // MARK: Equatable, Hashable, Codable: as if the headers were a stored dictionary

    public static func == (lhs: APIRawResponse, rhs: APIRawResponse) -> Bool {
        lhs.statusCode == rhs.statusCode && lhs.body == rhs.body && lhs.url == rhs.url && lhs.headers == rhs.headers
            && lhs.fileURL == rhs.fileURL
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(statusCode)
        hasher.combine(headers)
        hasher.combine(body)
        hasher.combine(url)
        hasher.combine(fileURL)
    }

    private enum CodingKeys: String, CodingKey {
        case statusCode, headers, body, url, fileURL
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            statusCode: try container.decode(Int.self, forKey: .statusCode),
            headers: try container.decode([String: String].self, forKey: .headers),
            body: try container.decode(Data.self, forKey: .body),
            url: try container.decodeIfPresent(URL.self, forKey: .url))
        fileURL = try container.decodeIfPresent(URL.self, forKey: .fileURL)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(statusCode, forKey: .statusCode)
        try container.encode(headers, forKey: .headers)
        try container.encode(body, forKey: .body)
        try container.encodeIfPresent(url, forKey: .url)
        try container.encodeIfPresent(fileURL, forKey: .fileURL)
    }
}

/// Where a transport's response headers come from, read only when someone asks for them.
protocol APIHeaderSource: Sendable {
    /// Every header, names as received.
    func allFields() -> [String: String]
    /// One header, its name matched without regard to case.
    func value(forHeader name: String) -> String?
    /// Every field of that name apart, in order; `nil` when the source joined them already.
    func separateValues(forHeader name: String) -> [String]?
}

extension APIHeaderSource {
    func separateValues(forHeader name: String) -> [String]? { nil }
}

/// Headers as a list of fields in the order received.
struct HeaderFieldList: APIHeaderSource {
    let fields: [(name: String, value: String)]

    func allFields() -> [String: String] {
        var headers: [String: String] = [:]
        headers.reserveCapacity(fields.count)
        for (name, value) in fields {
            if let earlier = headers[name] {
                headers[name] = earlier + ", " + value
            } else {
                headers[name] = value
            }
        }
        return headers
    }

    func value(forHeader name: String) -> String? {
        var found: String?
        for field in fields where Self.namesMatch(field.name, name) {
            found = found.map { $0 + ", " + field.value } ?? field.value
        }
        return found
    }

    func separateValues(forHeader name: String) -> [String]? {
        fields.filter { Self.namesMatch($0.name, name) }.map(\.value)
    }

    /// ASCII case-insensitive equality, without allocating lowercased copies (header names are
    /// tokens: RFC 9110 §5.1).
    static func namesMatch(_ left: String, _ right: String) -> Bool {
        var left = left
        var right = right
        return left.withUTF8 { a in
            right.withUTF8 { b in
                guard a.count == b.count else { return false }
                for index in 0..<a.count where a[index] != b[index] {
                    guard a[index] | 0x20 == b[index] | 0x20, (0x61...0x7A).contains(a[index] | 0x20) else {
                        return false
                    }
                }
                return true
            }
        }
    }
}

extension APIRawResponse {
    private enum HeaderStorage: Sendable {
        case fields([String: String])
        case source(LazyHeaders)
    }

    /// The headers of a source, turned into a dictionary once, on first use, by whichever thread
    /// asks first.
    private final class LazyHeaders: @unchecked Sendable {
        // @unchecked: `materialized` is read and written only while holding `lock`; `source` is
        // Sendable and never changes.
        let source: any APIHeaderSource
        private var materialized: [String: String]?

        /// Locks shared by all lazy headers, picked by address: most responses never build their
        /// headers, so none of them pays for a lock of its own (two allocations and a mutex).
        private static let locks: [Lock] = (0..<16).map { _ in Lock() }
        private var lock: Lock {
            Self.locks[Int(truncatingIfNeeded: UInt(bitPattern: ObjectIdentifier(self)) >> 4) & 15]
        }

        init(_ source: any APIHeaderSource) { self.source = source }

        var fields: [String: String] {
            if let fields = lock.withLock({ materialized }) { return fields }
            let fields = source.allFields()
            return lock.withLock {
                if let earlier = materialized { return earlier }
                materialized = fields
                return fields
            }
        }
    }
}
