import APIManagerKit
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``APIManagerKit/APITransport`` on swift-server's AsyncHTTPClient (SwiftNIO), for servers and
/// command-line tools on Linux, where it costs a fraction of FoundationNetworking's `URLSession`.
///
/// - It follows redirects itself (up to ``maxRedirects``, 20 unless set), applying APIManagerKit's one credential
///   rule at each hop (`APITransportOptions.redirectRequest(_:from:)`): credentials never follow a
///   redirect to another origin. A `303`, and a `301` or `302` answering a `POST`, continue as a
///   `GET` without a body.
/// - gzip and deflate bodies are decompressed; the per-request body limit counts decompressed bytes
///   and stops the transfer with `APIError.responseTooLarge(limit:)`.
/// - The request's `timeoutInterval` (``APIRequest/timeout``) is its idle timeout: no byte sent or
///   received for that long (each hop of a redirect counted alone; time a streamed body's consumer
///   or a download's file writes hold the connection back does not count) fails the attempt with
///   `URLError(.timedOut)`; `APITransportOptions.totalTimeout` bounds the whole attempt, redirects
///   included.
/// - Failures are mapped to the `URLError` codes the retry rules read: `.timedOut`,
///   `.cannotConnectToHost`, `.cannotFindHost`, `.networkConnectionLost`, `.cancelled`, `.badURL`.
/// - Only `http` and `https` URLs are sent, and followed: any other scheme fails with
///   `.unsupportedURL`. A body in a coding other than one gzip or deflate fails with
///   `.cannotDecodeContentData`.
/// - Cancelling the handle cancels the request.
public final class AsyncHTTPClientTransport: APITransport, Sendable {
    /// The client requests go through.
    public let client: HTTPClient
    /// `true`: a multipart form too large for memory goes from its files to the connection, never
    /// written to a temporary file.
    public var acceptsBodyWriters: Bool { true }
    private let ownsClient: Bool
    /// The most redirects one request follows (20 unless set, as FoundationNetworking's
    /// URLSession); one more fails the attempt with `URLError(.httpTooManyRedirects)`, as there.
    /// With 0, redirects are not followed: the `3xx` response is returned as it is.
    public let maxRedirects: Int
    private let inFlight = NIOLockedValueBox(0)

    /// The number of requests the transport still holds (for tests and leak checks): 0 once every
    /// request has ended.
    public var requestsInFlight: Int { inFlight.withLockedValue { $0 } }

    func exchangeStarted() { inFlight.withLockedValue { $0 += 1 } }
    func exchangeEnded() { inFlight.withLockedValue { $0 -= 1 } }

    /// A transport with an `HTTPClient` of its own (on the shared event loop group), to be shut down
    /// with ``shutdown()``. Three settings of `configuration` are replaced:
    /// - redirects are `.disallow` (the transport follows redirects itself);
    /// - decompression is on (the body limit counts decompressed bytes);
    /// - `connectionPool.retryConnectionEstablishment` is off, so a refused connection fails the
    ///   attempt at once with `URLError(.cannotConnectToHost)`, as on `URLSessionTransport`, and the
    ///   request's retry policy decides what happens next. (With it on, AsyncHTTPClient keeps
    ///   trying until its connect timeout, 10 s unless set, before it reports anything; borrow a
    ///   client configured so if that is what you want.)
    ///
    /// When the configuration's tracer is the no-op one (no tracer was bootstrapped with
    /// `InstrumentationSystem.bootstrap` before the configuration was made, and none was set), it is
    /// left out: AsyncHTTPClient would otherwise build and end a span that goes nowhere for every
    /// request (about 32k instructions per request here; Benchmarks/README.md). A bootstrapped or
    /// given tracer is kept, and so is a client you pass to ``init(client:maxRedirects:)``.
    public init(configuration: HTTPClient.Configuration = HTTPClient.Configuration(), maxRedirects: Int = 20) {
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.own(configuration))
        self.ownsClient = true
        self.maxRedirects = max(0, maxRedirects)
        self.hostClients = [:]
        self.trust = .system
        self.tlsConfigurations = ["": configuration.tlsConfiguration]
    }

    /// A transport with clients of its own: `client` for every host without a rule, one per host
    /// rule of `trust`.
    init(
        client: (HTTPClient, TLSConfiguration?), hostClients: [String: (HTTPClient, TLSConfiguration?)],
        trust: APIEngine.Trust, maxRedirects: Int
    ) {
        self.client = client.0
        self.ownsClient = true
        self.maxRedirects = max(0, maxRedirects)
        self.hostClients = hostClients.mapValues(\.0)
        self.trust = trust
        self.tlsConfigurations = hostClients.mapValues(\.1).merging(["": client.1]) { own, _ in own }
    }

    /// The trust servers are checked with (``init(configuration:trust:maxRedirects:)``); the
    /// system's unless given.
    public let trust: APIEngine.Trust
    /// The client of each host rule of ``trust``, by its pattern.
    private let hostClients: [String: HTTPClient]
    /// The TLS configuration of each client, by its pattern ("" for ``client``'s).
    private let tlsConfigurations: [String: TLSConfiguration?]

    /// The TLS configuration requests to `host` are sent with (`nil`: NIOSSL's client defaults).
    func tlsConfiguration(forHost host: String) -> TLSConfiguration? {
        tlsConfigurations[trust.pattern(forHost: host) ?? ""] ?? nil
    }

    /// The client a request to `host` goes through: its host rule's, or ``client``.
    func client(forHost host: String) -> HTTPClient {
        guard !hostClients.isEmpty, let pattern = trust.pattern(forHost: host) else { return client }
        return hostClients[pattern] ?? client
    }

    /// The configuration of the transport's own client: `configuration` with the settings
    /// ``init(configuration:maxRedirects:)`` replaces.
    static func own(_ configuration: HTTPClient.Configuration) -> HTTPClient.Configuration {
        var configuration = configuration
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .enabled(limit: .none)
        configuration.connectionPool.retryConnectionEstablishment = false
        if configuration.tracing.tracer is NoOpTracer { configuration.tracing.tracer = nil }
        return configuration
    }

    /// A transport on a client you own and shut down. Give it one whose redirect setting is
    /// `.disallow`, or AsyncHTTPClient follows redirects before the credential rule can apply; turn
    /// its decompression on for compressed bodies.
    public init(client: HTTPClient, maxRedirects: Int = 20) {
        self.client = client
        self.ownsClient = false
        self.maxRedirects = max(0, maxRedirects)
        self.hostClients = [:]
        self.trust = .system
        self.tlsConfigurations = [:]
    }

    /// Shuts down the client the transport made (requests in flight fail); does nothing for a
    /// borrowed client. Call it once, when no engine uses the transport any more; a transport
    /// released without it shuts its client down in the background.
    public func shutdown() async throws {
        guard ownsClient,
            shutDown.withLockedValue({ done in
                defer { done = true }
                return !done
            })
        else { return }
        try await client.shutdown()
        for hostClient in hostClients.values { try await hostClient.shutdown() }
    }

    private let shutDown = NIOLockedValueBox(false)

    deinit {
        // AsyncHTTPClient stops a debug build whose client is released without a shutdown.
        guard ownsClient, !shutDown.withLockedValue({ $0 }) else { return }
        client.shutdown(queue: .global()) { _ in }
        for hostClient in hostClients.values { hostClient.shutdown(queue: .global()) { _ in } }
    }

    /// Sends the request with AsyncHTTPClient: its `HTTPClient.Request` built from the fields
    /// directly, redirects followed as the type's description says.
    public func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let exchange = Exchange(transport: self, original: request, options: options, completion: completion)
        exchange.start()
        return exchange
    }

    /// Sends a `URLRequest` (see `send(_:options:completion:)` with an `APIHTTPRequest`).
    public func send(
        _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, options: APITransportOptions(), completion: completion)
    }

    /// Sends a `URLRequest` with the engine's options: a body stream is read from
    /// `options.bodyFile` or written by `options.bodyWriter` when they are given.
    public func send(
        _ request: URLRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        do {
            var value = try APIHTTPRequest(request, totalTimeout: options.totalTimeout)
            if let writer = options.bodyWriter {
                value.body = .writer(writer)
            } else if let file = options.bodyFile, request.httpBodyStream != nil {
                value.body = .file(file)
            }
            return send(value, options: options, completion: completion)
        } catch {
            completion(.failure(error))
            return Exchange.nothingToCancel
        }
    }
}

/// One request, its redirects included; also the handle that cancels it.
final class Exchange: APICancellable, Sendable {
    private struct State {
        var task: HTTPClient.Task<APIRawResponse>?
        var cancelled = false
        var finished = false
    }

    private let transport: AsyncHTTPClientTransport
    private let original: APIHTTPRequest
    private let options: APITransportOptions
    private let completion: @Sendable (Result<APIRawResponse, any Error>) -> Void
    private let deadline: NIODeadline?
    private let state = NIOLockedValueBox(State())

    init(
        transport: AsyncHTTPClientTransport, original: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) {
        self.transport = transport
        self.original = original
        self.options = options
        self.completion = completion
        self.deadline = Self.timeAmount(original.totalTimeout ?? options.totalTimeout).map { .now() + $0 }
    }

    /// `seconds` as a NIO time amount, at most ``APIRequestDefaults/maxTimeout``; `nil` for none.
    static func timeAmount(_ seconds: TimeInterval?) -> TimeAmount? {
        guard let seconds, seconds.isFinite, seconds > 0 else { return nil }
        return .nanoseconds(Int64(min(seconds, APIRequestDefaults.maxTimeout) * 1e9))
    }

    func start() {
        transport.exchangeStarted()
        send(original, redirects: 0)
    }

    func cancel() {
        let task = state.withLockedValue { state -> HTTPClient.Task<APIRawResponse>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    private func send(_ request: APIHTTPRequest, redirects: Int) {
        let converted: HTTPClient.Request
        do {
            converted = try Self.convert(request)
        } catch {
            finish(.failure(error))
            return
        }
        let collector = BodyCollector(
            url: request.url, limit: options.maxResponseBodySize, isHead: converted.method == .HEAD,
            progress: options.progress,
            uploadLength: options.progress == nil ? nil : Self.bodyLength(of: request),
            sink: options.responseBody, idleLimit: Self.timeAmount(request.timeout), headReceived: options.headReceived,
            protocolVersionReceived: options.protocolVersionReceived)
        let task = transport.client(forHost: converted.host).execute(
            request: converted, delegate: collector, deadline: deadline)
        collector.watchIdleTime(of: task)
        let proceed = state.withLockedValue { state -> Bool in
            guard !state.cancelled else { return false }
            state.task = task
            return true
        }
        if !proceed { task.cancel() }
        // A download's last parts may still be on their way to the disk (NIO's thread pool may be
        // busy) when the connection is cut: the attempt ends once they are written, so the engine
        // sees the whole part it may resume. A body that is not written off the loop has no such
        // parts: its answer goes on without the two futures.
        var answered = task.futureResult
        if options.responseBody?.writesBlock == true {
            answered = answered.flatMapWithEventLoop { raw, eventLoop in
                collector.writesDone(on: eventLoop).map { raw }
            }.flatMapErrorWithEventLoop { error, eventLoop in
                collector.writesDone(on: eventLoop).flatMapThrowing { _ -> APIRawResponse in throw error }
            }
        }
        answered.whenComplete { [self] result in
            switch result {
            case .success(let raw):
                switch redirect(of: request, answeredBy: raw, after: redirects) {
                case .follow(let next): send(next, redirects: redirects + 1)
                case .tooMany: finish(.failure(URLError(.httpTooManyRedirects)))
                case .unsupported: finish(.failure(URLError(.unsupportedURL)))
                case .refused(let failure): finish(.failure(failure))
                case .none: finish(.success(raw))
                }
            case .failure(let error):
                let mapped = Self.map(error, host: converted.host)
                guard let failure = mapped as? APIEngine.Trust.Failure, failure.reason == .untrustedRoot else {
                    return finish(.failure(mapped))
                }
                // BoringSSL does not say why it refused the certificate: its dates may.
                TrustDiagnosis.refine(
                    failure, host: converted.host, port: converted.port,
                    tls: transport.tlsConfiguration(forHost: converted.host),
                    on: task.eventLoop
                ).whenSuccess { self.finish(.failure($0)) }
            }
        }
    }

    private func finish(_ result: Result<APIRawResponse, any Error>) {
        let first = state.withLockedValue { state -> Bool in
            defer { state.finished = true }
            return !state.finished
        }
        if first {
            transport.exchangeEnded()
            completion(result)
        }
    }

    /// What a response to one hop of a request asks for.
    private enum Redirect {
        /// Not a redirect that can be followed (or redirects are off): the response as it is.
        case none
        case follow(APIHTTPRequest)
        /// One redirect more than ``AsyncHTTPClientTransport/maxRedirects``.
        case tooMany
        /// To a scheme other than http or https.
        case unsupported
        /// One that would send a stream body again (it can be read only once).
        case refused(APIError)
    }

    private func redirect(
        of request: APIHTTPRequest, answeredBy raw: APIRawResponse, after redirects: Int
    ) -> Redirect {
        guard [301, 302, 303, 307, 308].contains(raw.statusCode), transport.maxRedirects > 0,
            let location = raw.value(forHeader: "Location"),
            let target = URL(string: location, relativeTo: request.url)?.absoluteURL
        else { return .none }
        guard APIHTTPRules.isSendable(target) else { return .unsupported }
        guard redirects < transport.maxRedirects else { return .tooMany }
        var sendsStreamOnce = false
        if case .stream = request.body { sendsStreamOnce = true }
        if let failure = APIHTTPRules.streamBodyRedirectFailure(
            status: raw.statusCode, method: request.method.rawValue, sendsStreamOnce: sendsStreamOnce)
        {
            return .refused(failure)
        }
        var next = request
        next.url = target
        if APIHTTPRules.redirectBecomesGET(status: raw.statusCode, method: request.method.rawValue) {
            // The shared rule then drops the headers that described the body.
            next.method = .get
            next.body = .none
        }
        return .follow(options.redirectRequest(next, from: original.url, redirectResponse: raw))
    }

    /// The handle of a request that ended before it was sent.
    static let nothingToCancel: any APICancellable = NothingToCancel()

    private struct NothingToCancel: APICancellable {
        func cancel() {}
    }

    /// The request as AsyncHTTPClient's, its headers taken from the fields in order. A file body is
    /// read in chunks on NIO's thread pool as the connection takes it, and sent with its
    /// `Content-Length`; a body writer (a large multipart form) and a stream are read on NIO's
    /// thread pool too (they may block), each chunk written once the connection took the one
    /// before, with the `Content-Length` when it is known, else chunked.
    static func convert(_ request: APIHTTPRequest) throws -> HTTPClient.Request {
        guard APIHTTPRules.isSendable(request.url) else { throw URLError(.unsupportedURL) }
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headerFields.count)
        for field in request.headerFields { headers.add(name: field.name, value: field.value) }
        // With no Accept-Encoding of the request's own, the client's decompressor asks for gzip and
        // deflate.
        let method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        let body: HTTPClient.Body?
        switch request.body {
        case .none:
            body = nil
        case .data(let data):
            body = .bytes(data)
        case .writer(let writer):
            body = writtenBody(writer)
        case .file(let file):
            do {
                body = try fileBody(file)
            } catch {
                throw APIError.invalidRequest(
                    reason: "the body file \(file.lastPathComponent) cannot be read", underlying: error)
            }
        case .stream(let stream):
            body = streamBody(
                StreamReader(stream.stream),
                length: request.value(forHeaderField: "Content-Length").flatMap { Int($0) })
        }
        do {
            return try HTTPClient.Request(url: request.url, method: method, headers: headers, body: body)
        } catch {
            throw URLError(.badURL)
        }
    }

    /// The request body's length, for upload progress.
    private static func bodyLength(of request: APIHTTPRequest) -> Int64? {
        if case .file(let file) = request.body {
            return (try? FileManager.default.attributesOfItem(atPath: file.path))?[.size].flatMap { $0 as? NSNumber }?
                .int64Value
        }
        return request.bodyLength
    }

    private static func fileBody(_ url: URL) throws -> HTTPClient.Body {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        let length = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        let path = url.path
        return .stream(contentLength: length) { writer in
            let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
            // The body ends with the write of its last byte (see pooledBody).
            let done = eventLoop.makePromise(of: Void.self)
            let written = NIOLockedValueBox<Int64>(0)
            let fileIO = NonBlockingFileIO(threadPool: .singleton)
            fileIO.openFile(_deprecatedPath: path, eventLoop: eventLoop).flatMap { handle, region in
                fileIO.readChunked(
                    fileRegion: region, allocator: ByteBufferAllocator(), eventLoop: eventLoop
                ) { chunk in
                    let total = written.withLockedValue { total in
                        total += Int64(chunk.readableBytes)
                        return total
                    }
                    let write = writer.write(.byteBuffer(chunk))
                    if total == length { write.cascade(to: done) }
                    return write
                }.always { _ in try? handle.close() }
            }.whenComplete { result in
                switch result {
                case .success: if length == 0 { done.succeed(()) }
                case .failure(let error): done.fail(error)
                }
            }
            return done.futureResult
        }
    }

    /// A body read from an `InputStream`, 64 KiB at a time.
    private static func streamBody(_ reader: StreamReader, length: Int?) -> HTTPClient.Body {
        pooledBody(length: length.map(Int64.init)) { sink in
            try reader.open()
            defer { reader.close() }
            var sent = 0
            while let chunk = try reader.next(upTo: 64 << 10) {
                sent += chunk.count
                try sink(chunk)
            }
            if let length, sent != length {
                throw APIError.invalidRequest(
                    reason: "the body stream gave \(sent) bytes where its length said \(length)")
            }
        }
    }

    /// A body the engine's writer produces (a multipart form from its files).
    private static func writtenBody(_ writer: APIRequestBody.Writer) -> HTTPClient.Body {
        pooledBody(length: writer.length) { sink in try writer.write(to: sink) }
    }

    /// A body whose chunks `produce` reads (blocking: streams, a form's files) on NIO's thread pool,
    /// one written while the next is read, so memory stays at about three chunks. The body ends with the
    /// write of its last chunk, on that write's event loop, not after a hop back from the thread
    /// pool: a server that answers as soon as it has the last byte must find the body complete, or
    /// AsyncHTTPClient fails the request (`requestStreamCancelled`).
    private static func pooledBody(
        length: Int64?, produce: @escaping @Sendable (_ sink: (Data) throws -> Void) throws -> Void
    ) -> HTTPClient.Body {
        .stream(contentLength: length) { writer in
            let done = MultiThreadedEventLoopGroup.singleton.any().makePromise(of: Void.self)
            NIOThreadPool.singleton.submit { state in
                guard case .active = state else {
                    done.fail(CancellationError())
                    return
                }
                // One write in flight while the next chunk is read; the one before it waited for.
                var held: Data?
                var inFlight: EventLoopFuture<Void>?
                do {
                    try produce { chunk in
                        if let previous = held {
                            try inFlight?.wait()
                            inFlight = writer.write(.byteBuffer(ByteBuffer(data: previous)))
                        }
                        held = chunk
                    }
                    try inFlight?.wait()
                    if let last = held {
                        writer.write(.byteBuffer(ByteBuffer(data: last))).cascade(to: done)
                    } else {
                        done.succeed(())
                    }
                } catch {
                    done.fail(error)
                }
            }
            return done.futureResult
        }
    }

    /// AsyncHTTPClient's and SwiftNIO's errors as the `URLError` codes the retry rules read; an
    /// `APIError` (the body limit) as it is.
    static func map(_ error: any Error, host: String) -> any Error {
        if error is APIError || error is URLError { return error }
        if let failure = AsyncHTTPClientTransport.trustFailure(error, host: host) { return failure }
        if let error = error as? HTTPClientError {
            switch error {
            case .cancelled: return URLError(.cancelled)
            case .readTimeout, .writeTimeout, .deadlineExceeded, .connectTimeout, .getConnectionFromPoolTimeout,
                .tlsHandshakeTimeout:
                return URLError(.timedOut)
            case .remoteConnectionClosed: return URLError(.networkConnectionLost)
            case .invalidURL, .emptyHost, .emptyScheme: return URLError(.badURL)
            default: return URLError(.unknown, userInfo: [NSUnderlyingErrorKey: error])
            }
        }
        if let error = error as? NIOConnectionError {
            return error.dnsAError != nil || error.dnsAAAAError != nil && error.connectionErrors.isEmpty
                ? URLError(.cannotFindHost) : URLError(.cannotConnectToHost)
        }
        // A body cut short (the connection closed before its announced length arrived).
        if error is ChannelError || error is HTTPParserError { return URLError(.networkConnectionLost) }
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED { return URLError(.cannotConnectToHost) }
        return URLError(.unknown, userInfo: [NSUnderlyingErrorKey: error])
    }
}

/// Collects a response on its event loop: the head, then the body up to the limit.
final class BodyCollector: HTTPClientResponseDelegate, NIOScheduledCallbackHandler, @unchecked Sendable {
    // @unchecked: AsyncHTTPClient calls every method on the request's one event loop, in order.
    typealias Response = APIRawResponse

    private let url: URL?
    private let limit: Int?
    private let isHead: Bool
    private var head: HTTPResponseHead?
    /// The head's `Content-Length`; 0 when it gives none or the response has no body.
    private var announcedLength = 0
    private var body: ByteBuffer?
    /// Where progress goes (a task that asks for it); `nil` otherwise.
    private let progress: APITransferProgress.Reporter?
    /// The request body's length (for upload progress), and how much of it went.
    private let uploadLength: Int64?
    private var uploaded: Int64 = 0
    /// The body's announced length for download progress: `nil` when compressed or not announced.
    private var expectedDownload: Int64?
    /// Where a download's or a stream's body goes (``APITransportOptions/responseBody``), once the
    /// head said it is one for the sink: a sink whose writes block (a download's file) is written
    /// on NIO's thread pool, any other on the event loop; the next part is read once one is taken.
    private let sink: (any APIResponseBodySink)?
    private var route = Route.memory
    private enum Route {
        case memory
        /// To the sink; `offLoop` when its writes block.
        case sink(offLoop: Bool)
    }
    /// The bytes handed to the sink so far (for progress).
    private var sunk: Int64 = 0
    /// The last part handed to the thread pool for the sink; the attempt ends after it.
    private var lastWrite: EventLoopFuture<Void>?
    /// The idle timeout (the request's `timeoutInterval`); `nil` for none.
    private let idleLimit: TimeAmount?
    /// When a byte was last sent or received (or the exchange started).
    private var lastActivity = NIODeadline.now()
    /// Parts handed on and not yet taken (a stream's consumer behind, a file write on the pool): the
    /// connection is held back on purpose, which is not idle time.
    private var heldBack = 0
    /// The next idle check: a scheduled callback (no promise, no future), cancelled at the end.
    private var idleCheck: NIOScheduledCallback?
    /// Told when the response's head arrives (``APITransportOptions/headReceived``).
    private let headReceived: (@Sendable () -> Void)?
    /// Told the response's HTTP version (``APITransportOptions/protocolVersionReceived``).
    private let protocolVersionReceived: (@Sendable (String) -> Void)?
    /// The task whose idle time is watched, until the exchange ends.
    private var watched: HTTPClient.Task<APIRawResponse>?
    private var ended = false

    init(
        url: URL?, limit: Int?, isHead: Bool, progress: APITransferProgress.Reporter? = nil, uploadLength: Int64? = nil,
        sink: (any APIResponseBodySink)? = nil, idleLimit: TimeAmount? = nil,
        headReceived: (@Sendable () -> Void)? = nil, protocolVersionReceived: (@Sendable (String) -> Void)? = nil
    ) {
        self.headReceived = headReceived
        self.protocolVersionReceived = protocolVersionReceived
        self.idleLimit = idleLimit
        self.sink = sink
        self.url = url
        self.limit = limit
        self.isHead = isHead
        self.progress = progress
        self.uploadLength = uploadLength
    }

    // MARK: The idle timeout

    /// Starts counting idle time: fails the task with a read timeout once no byte went either way
    /// for ``idleLimit`` (on the request's event loop, like every other access to this collector).
    func watchIdleTime(of task: HTTPClient.Task<APIRawResponse>) {
        guard idleLimit != nil else { return }
        task.eventLoop.execute { [self] in
            guard !ended else { return }
            watched = task
            lastActivity = .now()
            scheduleIdleCheck(of: task, in: idleLimit ?? .zero)
        }
    }

    private func scheduleIdleCheck(of task: HTTPClient.Task<APIRawResponse>, in delay: TimeAmount) {
        // A scheduled callback, not `scheduleTask`: no promise and no future for every request.
        idleCheck = try? task.eventLoop.scheduleCallback(in: delay, handler: self)
    }

    /// The idle check is due (on the request's event loop).
    func handleScheduledCallback(eventLoop: some EventLoop) {
        idleCheck = nil
        guard let watched else { return }
        checkIdleTime(of: watched)
    }

    private func checkIdleTime(of task: HTTPClient.Task<APIRawResponse>) {
        guard !ended, let idleLimit else { return }
        let now = NIODeadline.now()
        if heldBack > 0 { lastActivity = now }
        let idle = now - lastActivity
        if idle >= idleLimit {
            end()
            task.fail(reason: HTTPClientError.readTimeout)
        } else {
            scheduleIdleCheck(of: task, in: idleLimit - idle)
        }
    }

    /// A byte went one way or the other.
    private func active() { lastActivity = .now() }

    /// The exchange is over: no more idle checks.
    private func end() {
        ended = true
        idleCheck?.cancel()
        idleCheck = nil
        watched = nil
    }

    /// Counts `future` as holding the connection back until it completes.
    private func holdBack(_ future: EventLoopFuture<Void>) -> EventLoopFuture<Void> {
        heldBack += 1
        future.whenComplete { [self] _ in
            heldBack -= 1
            active()
        }
        return future
    }

    func didReceiveError(task: HTTPClient.Task<APIRawResponse>, _ error: any Error) {
        end()
    }

    func didSendRequestHead(task: HTTPClient.Task<APIRawResponse>, _ head: HTTPRequestHead) {
        active()
    }

    func didSendRequestPart(task: HTTPClient.Task<APIRawResponse>, _ part: IOData) {
        active()
        guard let progress else { return }
        uploaded += Int64(part.readableBytes)
        progress(.upload, uploaded, uploadLength)
    }

    func didReceiveHead(task: HTTPClient.Task<APIRawResponse>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        active()
        headReceived?()
        if let protocolVersionReceived {
            // As OpenTelemetry writes it: `1.0`, `1.1`, `2`, `3`.
            let version = head.version
            protocolVersionReceived(version.major == 1 ? "1.\(version.minor)" : "\(version.major)")
        }
        self.head = head
        // SwiftNIO's decompressor decodes one gzip or deflate coding and passes anything else on
        // as it is: a body it cannot decode fails clearly instead of reaching a decoder as noise.
        let codings = APIHTTPRules.contentCodings(
            head.headers[canonicalForm: "Content-Encoding"].joined(separator: ","))
        guard codings.isEmpty || codings.count == 1 && (codings[0] == "gzip" || codings[0] == "deflate") else {
            return task.eventLoop.makeFailedFuture(URLError(.cannotDecodeContentData))
        }
        // A response to a HEAD, and a 1xx, 204 or 304, has no body whatever its Content-Length says
        // (RFC 9110 §6.4.1).
        if !APIHTTPRules.hasNoBody(method: isHead ? "HEAD" : nil, status: Int(head.status.code)) {
            announcedLength = head.headers.first(name: "Content-Length").flatMap { Int($0) } ?? 0
            if codings.isEmpty, head.headers.contains(name: "Content-Length") {
                expectedDownload = Int64(announcedLength)
            }
        }
        if let sink {
            do {
                if try sink.begin(statusCode: Int(head.status.code), headers: Self.dictionary(head.headers)) {
                    route = .sink(offLoop: sink.writesBlock)
                    return task.eventLoop.makeSucceededVoidFuture()
                }
            } catch {
                return task.eventLoop.makeFailedFuture(error)
            }
        }
        // A length already past the limit stops the transfer before the body, as on
        // URLSessionTransport (unless the body is compressed: the limit counts decompressed bytes).
        if let limit,
            APIHTTPRules.isRefusedAtHead(
                announcedLength: Int64(announcedLength), codings: codings, limit: limit)
        {
            return task.eventLoop.makeFailedFuture(APIError.responseTooLarge(limit: limit))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<APIRawResponse>, _ part: ByteBuffer) -> EventLoopFuture<Void> {
        active()
        if case .sink(let offLoop) = route, let sink {
            sunk += Int64(part.readableBytes)
            let data = Data(buffer: part, byteTransferStrategy: .noCopy)
            let progress = self.progress
            let (bytes, expected) = (sunk, expectedDownload)
            // The next part is read once this one is taken (backpressure).
            let ready = task.eventLoop.makePromise(of: Void.self)
            guard !offLoop else {
                // Off the event loop: a blocking write (a file) runs on NIO's thread pool.
                let write = NIOThreadPool.singleton.runIfActive(eventLoop: task.eventLoop) {
                    let goOn = try sink.write(data) { ready.succeed(()) }
                    progress?(.download, bytes, expected)
                    if goOn { ready.succeed(()) }
                }
                write.whenFailure { ready.fail($0) }
                lastWrite = write
                return holdBack(ready.futureResult)
            }
            progress?(.download, bytes, expected)
            do {
                if try sink.write(data, whenReady: { ready.succeed(()) }) { ready.succeed(()) }
            } catch {
                ready.fail(error)
            }
            return holdBack(ready.futureResult)
        }
        var part = part
        if body == nil {
            // A body in one part is kept as it is; one announced as longer gets a buffer of its
            // announced size (within the limit, and at most 8 MiB on a server's word), so the
            // parts are copied once, without regrowing.
            let expected = min(announcedLength, limit ?? Int.max, 8 << 20)
            if expected > part.readableBytes {
                var buffer = ByteBufferAllocator().buffer(capacity: expected)
                buffer.writeBuffer(&part)
                body = buffer
            } else {
                body = part
            }
        } else {
            body?.writeBuffer(&part)
        }
        if let limit, (body?.readableBytes ?? 0) > limit {
            return task.eventLoop.makeFailedFuture(APIError.responseTooLarge(limit: limit))
        }
        progress?(.download, Int64(body?.readableBytes ?? 0), expectedDownload)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    /// Succeeds once the last part handed to the thread pool is written (or failed to be): on the
    /// request's event loop, like every other access to this collector.
    func writesDone(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let lastWrite else { return eventLoop.makeSucceededVoidFuture() }
        return lastWrite.hop(to: eventLoop).flatMapErrorWithEventLoop { _, eventLoop in
            eventLoop.makeSucceededVoidFuture()
        }
    }

    /// The head's fields by name, repeated ones joined with commas.
    private static func dictionary(_ headers: HTTPHeaders) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in headers { fields[name] = fields[name].map { $0 + ", " + value } ?? value }
        return fields
    }

    func didFinishRequest(task: HTTPClient.Task<APIRawResponse>) throws -> APIRawResponse {
        end()
        guard let head else { throw URLError(.badServerResponse) }
        let data = body.map { Data(buffer: $0, byteTransferStrategy: .noCopy) } ?? Data()
        // The list as received: the dictionary is built only if someone asks for it.
        return APIRawResponse(
            statusCode: Int(head.status.code), headerFields: Array(head.headers), body: data, url: url)
    }
}

/// An `InputStream` read on one thread at a time (NIO's thread pool, by `streamBody`).
final class StreamReader: @unchecked Sendable {
    // @unchecked: the stream is touched only by the one thread-pool job that sends the body.
    private let stream: InputStream

    init(_ stream: InputStream) { self.stream = stream }

    // `streamError` is not read: on Linux its getter crashes (swift-corelibs-foundation).
    func open() throws {
        stream.open()
        if stream.streamStatus == .error {
            throw APIError.invalidRequest(reason: "the body stream could not be opened")
        }
    }

    func close() { stream.close() }

    /// The next bytes, at most `count`; `nil` at the end. Throws when the stream fails.
    func next(upTo count: Int) throws -> Data? {
        var buffer = [UInt8](repeating: 0, count: count)
        let read = stream.read(&buffer, maxLength: count)
        if read < 0 { throw APIError.invalidRequest(reason: "the body stream could not be read") }
        return read == 0 ? nil : Data(buffer[0..<read])
    }
}
