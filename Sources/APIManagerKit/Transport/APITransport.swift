import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The network seam: sends one `URLRequest` and reports what came back. ``URLSessionTransport`` is
/// the default; `MockTransport` (APIManagerKitTesting) scripts answers for tests.
///
/// A transport must call `completion` exactly once unless the request is cancelled (after which it
/// may call it or not; the engine drops any late call). It may call it on any thread, even before
/// ``send(_:completion:)`` returns.
public protocol APITransport: Sendable {
    /// Sends a request and calls `completion` with the raw response or the error.
    func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Sends a request whose headers named in `sensitiveHeaders` (credentials: `Authorization`, a
    /// custom auth header, persisted auth headers) must not follow a redirect to another origin.
    /// Defaults to ``send(_:completion:)``, for transports that do not follow redirects themselves.
    func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Sends a request with what the engine knows about it (see ``APITransportOptions``): the one
    /// the engine calls. Defaults to ``send(_:sensitiveHeaders:completion:)``, for transports that
    /// enforce no body limit themselves; the engine then checks the limit on the body it is given.
    func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Whether the transport sends a body given as ``APITransportOptions/bodyWriter``: a multipart
    /// form too large for memory then goes straight from its files to the connection, never written
    /// to a temporary file. `false` unless implemented: the engine writes such a form to a temporary
    /// file and gives it as ``APITransportOptions/bodyFile``.
    var acceptsBodyWriters: Bool { get }
}

/// What the engine tells a transport about a request beyond the `URLRequest`. The request's
/// `timeoutInterval` is its idle timeout (``APIRequest/timeout``: no byte either way for that long
/// fails the attempt with `URLError(.timedOut)`), and ``totalTimeout`` the longest the whole attempt
/// may take.
public struct APITransportOptions: Sendable, Hashable {
    /// The longest the whole attempt may take, sending to last byte (``APIRequest/totalTimeout``);
    /// `nil` for no limit.
    public var totalTimeout: TimeInterval?
    /// Headers that carry credentials beyond the standard ones (a custom auth header, persisted
    /// auth headers): they must not follow a redirect to another origin.
    public var sensitiveHeaders: Set<String>
    /// The largest response body to accept, in bytes after decompression; past it the transport
    /// stops the transfer and fails with ``APIError/responseTooLarge(limit:)``. `nil` for no limit.
    public var maxResponseBodySize: Int?
    /// The engine's cookie store (see ``APICookieStore``): a transport that follows redirects itself
    /// stores the `Set-Cookie` of each redirect response and sends the next hop with that hop's
    /// cookies, through ``redirectRequest(_:from:redirectResponse:)``. `nil` for none.
    public var cookies: APICookieStore?
    /// The time cookie expiry is judged at, on the engine's clock, when the attempt was sent;
    /// `nil` for the system's time.
    public var cookieDate: Date?
    /// The file the request's body streams from (its `httpBodyStream`), when the body is a file or
    /// a multipart form written to disk: a transport uploads it natively (``URLSessionTransport``
    /// with an upload task, so that it goes with its `Content-Length`). `nil` otherwise.
    public var bodyFile: URL?
    /// Where the transport reports the bytes sent and received as they go, for a task whose request
    /// reports progress (``APIRequest/reportsProgress``); `nil` for the others, which pay nothing.
    /// A transport that never calls it still works: the engine gives each direction its final report
    /// when the attempt completes. Not part of the options' equality.
    public var progress: APIProgressReporter?
    /// Where a `2xx` response's body goes instead of memory, for a download (``APIRequest/download``;
    /// see ``APIResponseBodyFile`` for what a transport calls); `nil` otherwise. A transport that does
    /// not support it still works: the engine writes the body it returns. Not part of the options'
    /// equality.
    public var responseBodyFile: APIResponseBodyFile?
    /// Where a `2xx` response's body goes as it arrives, for a streamed request
    /// (``APIManager/bytes(for:)``; see ``APIResponseBodyStream``); `nil` otherwise. A transport that
    /// does not support it still works: the engine hands the consumer the body it returns, whole. Not
    /// part of the options' equality.
    public var responseBodyStream: APIResponseBodyStream?
    /// The body, written part by part, for a transport that accepts it
    /// (``APITransport/acceptsBodyWriters``): a multipart form too large for memory. The request
    /// then carries its `Content-Length` and `Content-Type` and an empty `httpBodyStream`
    /// placeholder. `nil` otherwise. Not part of the options' equality.
    public var bodyWriter: APIBodyWriter?

    /// Options; none unless given.
    public init(
        sensitiveHeaders: Set<String> = [], maxResponseBodySize: Int? = nil, cookies: APICookieStore? = nil,
        cookieDate: Date? = nil, bodyFile: URL? = nil, progress: APIProgressReporter? = nil,
        responseBodyFile: APIResponseBodyFile? = nil, responseBodyStream: APIResponseBodyStream? = nil,
        bodyWriter: APIBodyWriter? = nil, totalTimeout: TimeInterval? = nil
    ) {
        self.totalTimeout = totalTimeout
        self.sensitiveHeaders = sensitiveHeaders
        self.maxResponseBodySize = maxResponseBodySize
        self.cookies = cookies
        self.cookieDate = cookieDate
        self.bodyFile = bodyFile
        self.progress = progress
        self.responseBodyFile = responseBodyFile
        self.responseBodyStream = responseBodyStream
        self.bodyWriter = bodyWriter
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.sensitiveHeaders == rhs.sensitiveHeaders && lhs.maxResponseBodySize == rhs.maxResponseBodySize
            && lhs.cookies == rhs.cookies && lhs.cookieDate == rhs.cookieDate && lhs.bodyFile == rhs.bodyFile
            && lhs.totalTimeout == rhs.totalTimeout
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(sensitiveHeaders)
        hasher.combine(maxResponseBodySize)
        hasher.combine(cookies)
        hasher.combine(cookieDate)
        hasher.combine(bodyFile)
        hasher.combine(totalTimeout)
    }
}

extension APITransport {
    public var acceptsBodyWriters: Bool { false }

    public func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, completion: completion)
    }

    public func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, sensitiveHeaders: options.sensitiveHeaders, completion: completion)
    }
}

extension APITransportOptions {
    /// The request to send when the server redirects a request whose URL was `originalURL` to
    /// `redirected`: every credential header (see ``sensitiveHeaders`` and the one credential rule:
    /// `Authorization`, `Proxy-Authorization`, `Cookie`, and names containing `token`, `secret`,
    /// `password`, `api-key`, `apikey`, `auth` or `session`) is dropped when the redirect leaves the
    /// original origin (scheme, host and port). A redirect that goes on as a `GET` or `HEAD` without a
    /// body (a `303`, or a `301` or `302` answering a `POST`) also loses the headers that described
    /// the body (`Content-Type`, `Content-Length`, `Content-Encoding`, `Content-Language`,
    /// `Content-Location`), as the Fetch standard says. ``URLSessionTransport`` follows this rule; a
    /// transport that follows redirects itself calls it for each hop, so every transport strips alike.
    public func redirectRequest(_ redirected: URLRequest, from originalURL: URL?) -> URLRequest {
        var stripped = redirected
        let method = redirected.httpMethod?.uppercased() ?? "GET"
        if method == "GET" || method == "HEAD", redirected.httpBody == nil, redirected.httpBodyStream == nil {
            for name in ["Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location"]
            where redirected.value(forHTTPHeaderField: name) != nil {
                stripped.setValue(nil, forHTTPHeaderField: name)
            }
        }
        guard Origin(originalURL) != Origin(redirected.url) else { return stripped }
        CredentialHeaders.remove(from: &stripped, marked: sensitiveHeaders)
        return stripped
    }

    /// ``redirectRequest(_:from:)``, and with a cookie store (``cookies``): the `Set-Cookie` of the
    /// redirect response (from `originalURL`) is stored first, and the next hop carries the cookies
    /// the store has for its own URL in place of the previous hop's. Every transport that follows
    /// redirects itself calls this for each hop.
    public func redirectRequest(
        _ redirected: URLRequest, from originalURL: URL?, redirectResponse: APIRawResponse?
    ) -> URLRequest {
        var next = redirectRequest(redirected, from: originalURL)
        guard let cookies else { return next }
        let now = cookieDate ?? Date()
        if let redirectResponse, let from = redirectResponse.url ?? originalURL {
            let fields = redirectResponse.setCookieFields
            if !fields.isEmpty { cookies.store(setCookie: fields, from: from, at: now) }
        }
        if let url = next.url {
            next.setValue(cookies.cookieHeader(for: url, at: now), forHTTPHeaderField: "Cookie")
        }
        return next
    }
}
