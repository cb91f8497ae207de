import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The network seam: sends one request (an ``APIHTTPRequest``) and reports what came back.
/// ``URLSessionTransport`` is the default; `MockTransport` (APIManagerKitTesting) scripts answers
/// for tests; AsyncHTTPClientTransport (its own package) runs on SwiftNIO.
///
/// A transport implements one method, `send(_:options:completion:)`. It must call `completion`
/// exactly once unless the request is cancelled (after which it may call it or not; the engine drops
/// any late call). It may call it on any thread, even before `send` returns.
///
/// A transport written before ``APIHTTPRequest`` (one that implements `send(_: URLRequest, …)`)
/// keeps working for this release: the default `send(_:options:completion:)` gives it the request
/// as a `URLRequest` (``APIHTTPRequest/urlRequest``) with the same options. To port one, rename the
/// method's request type and read the request from the value:
///
/// ```swift
/// func send(
///     _ request: APIHTTPRequest, options: APITransportOptions,
///     completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
/// ) -> any APICancellable {
///     let urlRequest = request.urlRequest  // or request.method, .url, .headerFields, .body
///     return legacyClient.start(urlRequest, completion: completion)  // what the old method did
/// }
/// ```
public protocol APITransport: Sendable {
    /// Sends a request with what the engine knows about it (see ``APITransportOptions``): the one
    /// method the engine calls. Defaults to `send(request.urlRequest, options:completion:)`, for a
    /// transport written before ``APIHTTPRequest``.
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Whether the transport sends a body given as ``APIHTTPRequest/Body/writer(_:)``: a multipart
    /// form too large for memory then goes straight from its files to the connection, never written
    /// to a temporary file. `false` unless implemented: the engine writes such a form to a temporary
    /// file and gives it as ``APIHTTPRequest/Body/file(_:)``.
    var acceptsBodyWriters: Bool { get }

    /// Sends a `URLRequest`: the requirement of transports written before ``APIHTTPRequest``, kept
    /// for this release. Its default fails the request with
    /// ``APIError/invalidRequest(reason:underlying:)``: a transport implements
    /// `send(_:options:completion:)` or this.
    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Sends a `URLRequest` whose headers named in `sensitiveHeaders` must not follow a redirect to
    /// another origin, for transports written before ``APIHTTPRequest``. Defaults to
    /// `send(_:completion:)`.
    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable

    /// Sends a `URLRequest` with the engine's options, for transports written before
    /// ``APIHTTPRequest``. Defaults to `send(_:sensitiveHeaders:completion:)`.
    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable
}

/// Where a response's body goes when it does not stay in memory: a download's file
/// (``APIResponseBodyFile``) or a stream's consumer (``APIResponseBodyStream``), given to the
/// transport as ``APITransportOptions/responseBody``.
///
/// A transport calls ``begin(statusCode:headers:)`` once the head arrives; when it returns `true`,
/// it calls ``write(_:whenReady:)`` for each part of the body, in order, one call at a time, from
/// any thread, and reads the next part only once a write returned `true` or called `whenReady`.
/// When it returns `false` the body is not the sink's (an error status, say): the transport keeps
/// it in memory as for any request. A call that throws stops the transfer: the transport cancels
/// the request and answers with any error (the engine reports the sink's). The body's end and a
/// failure of the exchange reach the engine through the transport's one completion, never through
/// the sink, so every request still has exactly one answer.
///
/// Each sink's transfer machine owns the race between a cancellation and the transport's late
/// calls: after the task was cancelled a head opens nothing and a part goes nowhere.
public protocol APIResponseBodySink: AnyObject, Sendable {
    /// The head arrived. Returns whether the body goes to the sink; throws to stop the transfer.
    func begin(statusCode: Int, headers: [String: String]) throws -> Bool
    /// Hands over a part of the body. Returns `true` to go on reading; `false` to wait until
    /// `whenReady` is called (the consumer is behind). Throws to stop the transfer (a full disk, a
    /// file past its size limit).
    func write(_ data: Data, whenReady: @escaping @Sendable () -> Void) throws -> Bool
    /// Whether ``write(_:whenReady:)`` may block on the file system: a transport that runs on an
    /// event loop calls it off the loop (AsyncHTTPClientTransport uses NIO's thread pool). `false`
    /// unless implemented.
    var writesBlock: Bool { get }
}

extension APIResponseBodySink {
    public var writesBlock: Bool { false }
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
    /// cookies, through `redirectRequest(_:from:redirectResponse:)`. `nil` for none.
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
    public var progress: APITransferProgress.Reporter?
    /// Where the response's body goes instead of memory, when it does (see ``APIResponseBodySink``
    /// for what a transport calls): a download's file (``APIRequest/download``,
    /// ``APIResponseBodyFile``) or a streamed request's consumer (``APIManager/bytes(for:)``,
    /// ``APIResponseBodyStream``); `nil` for a body kept in memory. A transport that does not
    /// support it still works: the engine writes the body it returns to the file, or hands it to
    /// the consumer whole. Not part of the options' equality.
    public var responseBody: (any APIResponseBodySink)?
    /// The download's file, when ``responseBody`` is one.
    @available(*, deprecated, message: "Use responseBody: one sink for every body that does not stay in memory")
    public var responseBodyFile: APIResponseBodyFile? {
        get { responseBody as? APIResponseBodyFile }
        set { responseBody = newValue }
    }
    /// The stream, when ``responseBody`` is one.
    @available(*, deprecated, message: "Use responseBody: one sink for every body that does not stay in memory")
    public var responseBodyStream: APIResponseBodyStream? {
        get { responseBody as? APIResponseBodyStream }
        set { responseBody = newValue }
    }
    /// The body, written part by part, for a transport that accepts it
    /// (``APITransport/acceptsBodyWriters``): a multipart form too large for memory. The request
    /// then carries its `Content-Length` and `Content-Type` and an empty `httpBodyStream`
    /// placeholder. `nil` otherwise. Not part of the options' equality.
    public var bodyWriter: APIRequestBody.Writer?
    /// Called by the transport once, when the response's status line and headers arrived (the time
    /// to first byte, for the engine's observers: ``APIEngine/AttemptReport/headReceived``); `nil`
    /// unless the engine has observers. A transport that never calls it still works (the report
    /// then has no such time). Not part of the options' equality.
    public var headReceived: (@Sendable () -> Void)?
    /// Called by a transport that measures an exchange's phases (DNS, connection, TLS, waiting for
    /// the server), before it answers, for the engine's observers
    /// (``APIEngine/AttemptReport/phases``): ``URLSessionTransport`` on Apple platforms, from
    /// `URLSessionTaskMetrics` (FoundationNetworking on Linux collects none); `nil` unless the
    /// engine has observers. Not part of the options' equality.
    public var phasesMeasured: (@Sendable (APIEngine.AttemptReport.Phases) -> Void)?
    /// Called by a transport that knows the HTTP version its response came in, before it answers,
    /// as OpenTelemetry's `network.protocol.version` writes it (`1.0`, `1.1`, `2`, `3`), for the
    /// engine's observers (``APIEngine/AttemptReport/protocolVersion``): `AsyncHTTPClientTransport`
    /// from the response's head, ``URLSessionTransport`` on Apple platforms from its metrics
    /// (FoundationNetworking on Linux tells none), `MockTransport` as its `protocolVersion` says;
    /// `nil` unless the engine has observers. Not part of the options' equality.
    public var protocolVersionReceived: (@Sendable (String) -> Void)?

    /// Options; none unless given.
    public init(
        sensitiveHeaders: Set<String> = [], maxResponseBodySize: Int? = nil, cookies: APICookieStore? = nil,
        cookieDate: Date? = nil, bodyFile: URL? = nil, progress: APITransferProgress.Reporter? = nil,
        responseBody: (any APIResponseBodySink)? = nil, bodyWriter: APIRequestBody.Writer? = nil,
        totalTimeout: TimeInterval? = nil
    ) {
        self.totalTimeout = totalTimeout
        self.sensitiveHeaders = sensitiveHeaders
        self.maxResponseBodySize = maxResponseBodySize
        self.cookies = cookies
        self.cookieDate = cookieDate
        self.bodyFile = bodyFile
        self.progress = progress
        self.responseBody = responseBody
        self.bodyWriter = bodyWriter
    }

    /// Options with a download's file or a stream given apart (before ``responseBody``).
    @available(*, deprecated, message: "Pass the file or the stream as responseBody")
    public init(
        sensitiveHeaders: Set<String> = [], maxResponseBodySize: Int? = nil, cookies: APICookieStore? = nil,
        cookieDate: Date? = nil, bodyFile: URL? = nil, progress: APITransferProgress.Reporter? = nil,
        responseBodyFile: APIResponseBodyFile?, responseBodyStream: APIResponseBodyStream? = nil,
        bodyWriter: APIRequestBody.Writer? = nil, totalTimeout: TimeInterval? = nil
    ) {
        self.init(
            sensitiveHeaders: sensitiveHeaders, maxResponseBodySize: maxResponseBodySize, cookies: cookies,
            cookieDate: cookieDate, bodyFile: bodyFile, progress: progress,
            responseBody: responseBodyFile ?? responseBodyStream, bodyWriter: bodyWriter, totalTimeout: totalTimeout)
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

    /// The adapter for a transport written before ``APIHTTPRequest``: the request as a `URLRequest`
    /// (``APIHTTPRequest/urlRequest``), with the same options.
    @available(*, deprecated, message: "The adapter for a URLRequest transport: implement this method instead")
    public func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request.urlRequest, options: options, completion: completion)
    }

    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    public func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        completion(
            .failure(
                APIError.invalidRequest(
                    reason: "the transport \(type(of: self)) implements neither send(_: APIHTTPRequest, options:"
                        + "completion:) nor send(_: URLRequest, completion:)")))
        return NotCancellable()
    }

    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    public func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, completion: completion)
    }

    @available(*, deprecated, message: "Implement send(_: APIHTTPRequest, options:completion:)")
    public func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, sensitiveHeaders: options.sensitiveHeaders, completion: completion)
    }
}

/// The handle of a request that ended before it could be cancelled.
private struct NotCancellable: APICancellable {
    func cancel() {}
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

    /// The next hop of `redirected` by the same rule as ``redirectRequest(_:from:)-(URLRequest,_)``,
    /// for a transport that speaks ``APIHTTPRequest``: the body's headers dropped when the hop goes on
    /// as a `GET` or `HEAD` without a body, every credential header dropped when it leaves the
    /// origin of `originalURL`.
    public func redirectRequest(_ redirected: APIHTTPRequest, from originalURL: URL?) -> APIHTTPRequest {
        var stripped = redirected
        if redirected.method == .get || redirected.method == .head, case .none = redirected.body {
            let described: Set<String> = [
                "content-type", "content-length", "content-encoding", "content-language", "content-location",
            ]
            stripped.headerFields.removeAll { described.contains($0.name.lowercased()) }
        }
        guard Origin(originalURL) != Origin(redirected.url) else { return stripped }
        CredentialHeaders.remove(from: &stripped, marked: sensitiveHeaders)
        return stripped
    }

    /// ``redirectRequest(_:from:)-(APIHTTPRequest,_)`` with the cookie store's rule of
    /// ``redirectRequest(_:from:redirectResponse:)-(URLRequest,_,_)``: the redirect response's
    /// `Set-Cookie` stored first, the next hop carrying the store's cookies for its own URL.
    public func redirectRequest(
        _ redirected: APIHTTPRequest, from originalURL: URL?, redirectResponse: APIRawResponse?
    ) -> APIHTTPRequest {
        var next = redirectRequest(redirected, from: originalURL)
        guard let cookies else { return next }
        next.setValue(
            nextHopCookie(cookies, to: next.url, from: originalURL, redirectResponse: redirectResponse),
            forHeaderField: "Cookie")
        return next
    }

    /// The cookie step of a redirect hop: the redirect response's `Set-Cookie` stored (as from
    /// its own URL, else `originalURL`), then the `Cookie` header the next hop carries to `url`
    /// (`nil` for none).
    private func nextHopCookie(
        _ cookies: APICookieStore, to url: URL?, from originalURL: URL?, redirectResponse: APIRawResponse?
    ) -> String? {
        let now = cookieDate ?? Date()
        if let redirectResponse, let from = redirectResponse.url ?? originalURL {
            let fields = redirectResponse.setCookieFields
            if !fields.isEmpty { cookies.store(setCookie: fields, from: from, at: now) }
        }
        return url.flatMap { cookies.cookieHeader(for: $0, at: now) }
    }

    /// `redirectRequest(_:from:)`, and with a cookie store (``cookies``): the `Set-Cookie` of the
    /// redirect response (from `originalURL`) is stored first, and the next hop carries the cookies
    /// the store has for its own URL in place of the previous hop's. Every transport that follows
    /// redirects itself calls this for each hop.
    public func redirectRequest(
        _ redirected: URLRequest, from originalURL: URL?, redirectResponse: APIRawResponse?
    ) -> URLRequest {
        var next = redirectRequest(redirected, from: originalURL)
        guard let cookies else { return next }
        let header = nextHopCookie(cookies, to: next.url, from: originalURL, redirectResponse: redirectResponse)
        if next.url != nil { next.setValue(header, forHTTPHeaderField: "Cookie") }
        return next
    }
}
