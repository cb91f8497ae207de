import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request as the engine hands it to a transport (`send(_:options:completion:)`):
/// method, URL, header fields in order, body and timeouts, and nothing a transport would have to
/// take apart again. ``URLSessionTransport`` makes its `URLRequest` from it (``urlRequest``);
/// AsyncHTTPClientTransport builds its own request from the fields directly.
///
/// The engine builds it once the request passed every stage (credential, interceptors, cache
/// validators): its header fields are checked (no CR, LF or NUL, names are tokens) and its timeouts
/// positive and finite.
public struct APIHTTPRequest: Sendable {
    /// One header field. Names keep the case they were given; compare them with
    /// ``APIHTTPRequest/value(forHeaderField:)``, which ignores case.
    public struct Field: Sendable, Hashable {
        /// The field's name, as given.
        public var name: String
        /// The field's value, as given.
        public var value: String

        /// A field named `name` with `value`.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// What the request sends after its head.
    public enum Body: Sendable {
        /// No body.
        case none
        /// Bytes held in memory.
        case data(Data)
        /// A file, read as the connection takes it; the request's `Content-Length` gives its size.
        case file(URL)
        /// A stream read once, as the connection takes it, with a `Content-Length` when its length
        /// is known (else the transport sends it chunked). A transport that follows a redirect
        /// cannot send it twice.
        case stream(APIHTTPRequest.BodyStream)
        /// A body written part by part (a multipart form too large for memory), for a transport that
        /// accepts it (``APITransport/acceptsBodyWriters``).
        case writer(APIRequestBody.Writer)
    }

    /// An `InputStream` handed to the one transport that reads it.
    ///
    /// @unchecked: the stream is read by one party only, the transport the request is given to (as
    /// a `URLRequest`'s `httpBodyStream` is); nothing else touches it.
    public struct BodyStream: @unchecked Sendable {
        /// The stream, not yet opened.
        public let stream: InputStream

        /// `stream`, for the transport to read once.
        public init(_ stream: InputStream) { self.stream = stream }
    }

    /// The method: `GET` unless given.
    public var method: HTTPMethod {
        get { storage.method }
        set { change { $0.method = newValue } }
    }
    /// The URL, with its query.
    public var url: URL {
        get { storage.url }
        set { change { $0.url = newValue } }
    }
    /// The header fields, in the order they are sent.
    public var headerFields: [Field] {
        get { storage.headerFields }
        set { change { $0.headerFields = newValue } }
    }
    /// The body: ``Body/none`` unless given.
    public var body: Body {
        get { storage.body }
        set { change { $0.body = newValue } }
    }
    /// The idle timeout (``APIRequest/timeout``): no byte either way for this long fails the
    /// attempt with `URLError(.timedOut)`. 60 seconds unless given.
    public var timeout: TimeInterval {
        get { storage.timeout }
        set { change { $0.timeout = newValue } }
    }
    /// The longest the whole attempt may take, sending to last byte (``APIRequest/totalTimeout``);
    /// `nil` for no limit.
    public var totalTimeout: TimeInterval? {
        get { storage.totalTimeout }
        set { change(keepingSource: true) { $0.totalTimeout = newValue } }
    }

    /// The fields, in one reference: the engine and a transport pass the request on with one
    /// retain instead of a copy of each field. Copied before a change when shared.
    ///
    /// @unchecked: written only while uniquely referenced (see `change`), read-only once shared.
    private final class Storage: @unchecked Sendable {
        var method: HTTPMethod
        var url: URL
        var headerFields: [Field]
        var body: Body
        var timeout: TimeInterval
        var totalTimeout: TimeInterval?
        /// The `URLRequest` the value was made from, while nothing changed it: ``urlRequest`` gives
        /// it back as it was (its body stream the same object) instead of building another.
        var source: URLRequest?

        init(
            method: HTTPMethod, url: URL, headerFields: [Field], body: Body, timeout: TimeInterval,
            totalTimeout: TimeInterval?, source: URLRequest?
        ) {
            self.method = method
            self.url = url
            self.headerFields = headerFields
            self.body = body
            self.timeout = timeout
            self.totalTimeout = totalTimeout
            self.source = source
        }

        func copy() -> Storage {
            Storage(
                method: method, url: url, headerFields: headerFields, body: body, timeout: timeout,
                totalTimeout: totalTimeout, source: source)
        }
    }

    private var storage: Storage

    /// Changes the storage, copying it first when another value shares it; the source
    /// `URLRequest` no longer describes the value unless the change is one it does not carry.
    private mutating func change(keepingSource: Bool = false, _ body: (Storage) -> Void) {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        body(storage)
        if !keepingSource { storage.source = nil }
    }

    /// A request to `url`: a `GET` with no fields, no body and a 60-second idle timeout unless given.
    public init(
        method: HTTPMethod = .get, url: URL, headerFields: [Field] = [], body: Body = .none, timeout: TimeInterval = 60,
        totalTimeout: TimeInterval? = nil
    ) {
        storage = Storage(
            method: method, url: url, headerFields: headerFields, body: body, timeout: timeout,
            totalTimeout: totalTimeout, source: nil)
    }

    /// The request that `request` describes: its `httpBody` as ``Body/data(_:)``; its
    /// `httpBodyStream` as the file or the form it streams when the manager built it
    /// (``APIRequest/makeURLRequest()``), else as ``Body/stream(_:)``.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when `request` has no URL.
    public init(_ request: URLRequest, totalTimeout: TimeInterval? = nil) throws(APIError) {
        let body: BodyFile? = request.httpBodyStream.flatMap { BodyFile.registered(for: $0) }
        try self.init(request, bodyFile: body, totalTimeout: totalTimeout)
    }

    /// The request the engine sends: `bodyFile` is the file (or the form) the request's body
    /// stream reads, which the attempt owns.
    init(_ request: URLRequest, bodyFile: BodyFile?, totalTimeout: TimeInterval?) throws(APIError) {
        guard let url = request.url else { throw .invalidRequest(reason: "the request has no URL") }
        let headerFields = (request.allHTTPHeaderFields ?? [:]).map { Field(name: $0.key, value: $0.value) }
        let body: Body
        if let bodyFile {
            body = bodyFile.deferredWriter.map(Body.writer) ?? .file(bodyFile.url)
        } else if let stream = request.httpBodyStream {
            body = .stream(BodyStream(stream))
        } else if let data = request.httpBody {
            body = .data(data)
        } else {
            body = .none
        }
        storage = Storage(
            method: request.httpMethod.map { HTTPMethod(rawValue: $0) } ?? .get, url: url, headerFields: headerFields,
            body: body, timeout: request.timeoutInterval, totalTimeout: totalTimeout, source: request)
    }

    /// The value of the header field `name` (case-insensitive); several fields of that name are
    /// joined with `", "`. `nil` when the request has none.
    public func value(forHeaderField name: String) -> String? {
        var found: String?
        for field in headerFields where field.name.caseInsensitiveCompare(name) == .orderedSame {
            found = found.map { $0 + ", " + field.value } ?? field.value
        }
        return found
    }

    /// Sets the header field `name` (case-insensitive) to `value`, in place of any it had, at the
    /// end of the fields; `nil` removes it.
    public mutating func setValue(_ value: String?, forHeaderField name: String) {
        headerFields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        if let value { headerFields.append(Field(name: name, value: value)) }
    }

    /// The request as a `URLRequest`: method, URL, fields, idle timeout and body (a file or a stream
    /// as `httpBodyStream`, a body writer as an empty stream placeholder: a transport that takes
    /// writers reads ``body`` instead). For a value made from a `URLRequest` and left unchanged,
    /// that request itself.
    public var urlRequest: URLRequest {
        if let source = storage.source { return source }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        if method != .get { request.httpMethod = method.rawValue }
        for field in headerFields {
            if request.value(forHTTPHeaderField: field.name) == nil {
                request.setValue(field.value, forHTTPHeaderField: field.name)
            } else {
                request.addValue(field.value, forHTTPHeaderField: field.name)
            }
        }
        switch body {
        case .none: break
        case .data(let data): request.httpBody = data
        case .file(let file): request.httpBodyStream = InputStream(url: file) ?? InputStream(data: Data())
        case .stream(let stream): request.httpBodyStream = stream.stream
        case .writer: request.httpBodyStream = InputStream(data: Data())
        }
        return request
    }

    /// The body's length in bytes when it is known: the bytes' count, else the `Content-Length`.
    public var bodyLength: Int64? {
        switch body {
        case .none: return nil
        case .data(let data): return Int64(data.count)
        case .file, .stream, .writer: return value(forHeaderField: "Content-Length").flatMap { Int64($0) }
        }
    }
}
