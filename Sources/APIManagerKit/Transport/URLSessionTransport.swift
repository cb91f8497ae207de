import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests with one `URLSession` of its own, whose delegate (``URLSessionTransport``'s, not
/// yours) follows redirects safely, answers authentication challenges and collects bodies.
/// Connections are reused (keep-alive); nothing about a request is kept once it ends; cancelling a
/// task cancels its `URLSessionTask`.
///
/// - Redirects are followed, but when one leaves the request's origin (scheme, host and port) the
///   credential headers are removed first: those ``APISecrets`` names (`Authorization`, `Cookie`,
///   `X-API-Key`…) and any header the engine marks sensitive (a custom auth header, persisted auth
///   headers): the rule that also redacts cURL descriptions.
/// - A `401` is delivered as the response it is, body included: credentials travel in headers
///   (``APIAuthentication/Authorization``), never through challenges.
/// - A request's `timeoutInterval` (``APIRequest/timeout``) is its idle timeout: the longest the
///   attempt may go without a byte sent or received (time a stream's consumer holds the task back
///   does not count), and ``APITransportOptions/totalTimeout`` the longest the whole attempt may
///   take; both are enforced here (checked every 50 ms) on every platform, and the attempt then fails
///   with `URLError(.timedOut)`. The Linux URLSession ignores a request's own timeout and applies the
///   configuration's `timeoutIntervalForRequest` as an idle limit: ``defaultConfiguration`` sets it
///   to ``APIRequestDefaults/maxTimeout`` so that the request's own counts; a configuration of yours
///   keeps its own, which then applies too. Idle time is counted from when the session hands the
///   transport a part: on Linux every task's parts pass through the session's one delegate queue, so
///   a stream beside a transfer that floods it (a refused gzip bomb, hundreds of MiB) gets its parts
///   late, and a short idle limit can expire while bytes flow; give such sessions a transport of
///   their own, or a generous `timeout`.
/// - The body is collected chunk by chunk, so a body limit
///   (``APITransportOptions/maxResponseBodySize``) stops the transfer as soon as the decompressed
///   body passes it, and fails with ``APIError/responseTooLarge(limit:)``. A `Content-Length`
///   already past the limit (without a `Content-Encoding`) stops it before the first byte. On Linux
///   a compressed body is inflated whole by libcurl, and FoundationNetworking queues every chunk
///   for the delegate before the transport can cancel: memory follows the inflated size while such
///   a body is refused (a 1 GiB gzip bomb refused at 1 MiB peaks near 1.1 GiB).
/// - On Linux, libcurl reuses a kept-alive connection on which the server sent bytes past the last
///   answer's `Content-Length`, and reads them as the next request's answer; FoundationNetworking
///   offers no way to refuse that reuse. Prefer `AsyncHTTPClientTransport` (which closes such a
///   connection) for servers you do not trust.
/// - A connection that closes after the response head but before the whole body fails with
///   `URLError(.networkConnectionLost)` (retried for idempotent methods by the default
///   ``APIRetryPolicy``), not the `URLError(.unknown)` the Linux URLSession reports.
/// - Only `http` and `https` URLs are sent; any other scheme (`file`, `ftp`, `data` …) fails with
///   `URLError(.unsupportedURL)` before URLSession sees it, and so does a redirect to one.
/// - A body in a content coding URLSession cannot decode fails with
///   `URLError(.cannotDecodeContentData)`.
/// - Cookies: the session never adds a `Cookie` header nor stores a `Set-Cookie` on its own, on any
///   configuration (``init(configuration:)`` turns it off), so every credential sent passes through
///   the engine, which applies the cache's rule for authenticated requests to it. Give the engine an
///   ``APICookieStore`` (redirect hops store their `Set-Cookie` in it here too), or send a `Cookie`
///   header yourself.
public final class URLSessionTransport: APITransport {
    /// The transport managers use unless given another, with an ephemeral configuration.
    public static let shared = URLSessionTransport()

    /// An ephemeral configuration (no shared cookies or credentials) without a `URLCache`: responses
    /// are cached by ``APIResponseCache`` when a request asks for it, never silently by URLSession
    /// (whose in-memory cache would also grow by every cacheable response, about 4 MB per 20k
    /// small responses on Linux).
    public static var defaultConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        // The transport enforces each request's idle and total timeouts itself.
        configuration.timeoutIntervalForRequest = APIRequestDefaults.maxTimeout
        configuration.timeoutIntervalForResource = APIRequestDefaults.maxTimeout
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return configuration
    }

    /// The session; its delegate belongs to the transport.
    public let session: URLSession
    private let delegate: SessionDelegate

    /// - Parameter configuration: ``defaultConfiguration`` unless given. A copy is used, with the
    ///   session's own cookie handling turned off.
    public convenience init(configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration) {
        self.init(configuration: configuration, delegate: SessionDelegate())
    }

    /// A transport that trusts servers as `trust` says (``APIEngine/Trust``): on Apple platforms the
    /// server-trust challenge is evaluated with `SecTrust` (the rule's roots as anchors, the
    /// host-name policy, then its pins against every certificate of the evaluated chain) and a
    /// client-certificate challenge is answered with the rule's identity (PKCS #12 only).
    ///
    /// Throws ``APIEngine/Trust/Failure`` when `trust` cannot be applied: a host pattern or an
    /// identity that is not valid, a PEM identity on Apple platforms, and, **on Linux, any trust but
    /// the system's** (``APIEngine/Trust/Failure/Reason/unsupportedByTransport``): FoundationNetworking
    /// gives its delegate no trust challenge, so roots, pins and identities could not be honoured.
    /// Use `AsyncHTTPClientTransport` there.
    /// - Parameters:
    ///   - configuration: ``defaultConfiguration`` unless given, as ``init(configuration:)``.
    ///   - trust: the roots, pins and client identity, for every host or per host.
    public convenience init(
        configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration, trust: APIEngine.Trust
    ) throws {
        try trust.validate()
        #if canImport(FoundationNetworking)
        guard trust.isSystemTrust else {
            throw APIEngine.Trust.Failure(
                host: "", reason: .unsupportedByTransport,
                detail: "URLSessionTransport on Linux cannot apply roots, pins or a client identity: "
                    + "FoundationNetworking gives its delegate no trust challenge; use AsyncHTTPClientTransport "
                    + "(the APIManagerKitAsyncHTTPClient package), which applies them")
        }
        self.init(configuration: configuration, delegate: SessionDelegate())
        #else
        self.init(configuration: configuration, delegate: SessionDelegate(trust: try ServerTrustEvaluator(trust)))
        #endif
    }

    private init(configuration: URLSessionConfiguration, delegate: SessionDelegate) {
        self.delegate = delegate
        let configuration = configuration.copy() as? URLSessionConfiguration ?? configuration
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit {
        // The session holds its delegate until it is invalidated; this ends that cycle once the
        // requests in flight have finished.
        session.finishTasksAndInvalidate()
    }

    /// Sends a request with its session (see the type's description): as the `URLRequest` it
    /// describes (``APIHTTPRequest/urlRequest``), a file body as an upload task.
    public func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        var options = options
        if case .file(let file) = request.body { options.bodyFile = file }
        if let totalTimeout = request.totalTimeout { options.totalTimeout = totalTimeout }
        return start(request.urlRequest, options: options, completion: completion)
    }

    /// Sends a `URLRequest` with its session.
    public func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        start(request, options: APITransportOptions(), completion: completion)
    }

    public func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        start(request, options: APITransportOptions(sensitiveHeaders: sensitiveHeaders), completion: completion)
    }

    public func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        start(request, options: options, completion: completion)
    }

    private func start(
        _ request: URLRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        // An API client speaks HTTP: URLSession would otherwise read a file:// URL, or try FTP.
        guard APIHTTPRules.isSendable(request.url) else {
            completion(.failure(URLError(.unsupportedURL)))
            return NothingToCancel()
        }
        let task: URLSessionTask
        if let file = options.bodyFile, request.httpBodyStream != nil {
            // A body from a file goes as an upload task, with its Content-Length: a stream body goes
            // chunked on Linux (and with a Content-Length header too, which servers refuse).
            var upload = request
            upload.httpBodyStream = nil
            task = session.uploadTask(with: upload, fromFile: file)
        } else {
            #if canImport(FoundationNetworking)
            // FoundationNetworking sends any stream chunked, and with a Content-Length too if the
            // request names one, which servers refuse: chunked alone.
            if request.httpBodyStream != nil, request.value(forHTTPHeaderField: "Content-Length") != nil {
                var chunked = request
                chunked.setValue(nil, forHTTPHeaderField: "Content-Length")
                task = session.dataTask(with: chunked)
            } else {
                task = session.dataTask(with: request)
            }
            #else
            task = session.dataTask(with: request)
            #endif
        }
        // The delegate keeps what the request needs until the task completes; `finish` lets it go.
        var transfer = Transfer(
            requestURL: request.url, options: options, timeout: request.timeoutInterval, task: task,
            completion: completion)
        #if canImport(FoundationNetworking)
        // On Linux a redirected upload task waits for a body it never sends: files count as once too.
        transfer.sendsStreamOnce = request.httpBodyStream != nil
        #else
        transfer.sendsStreamOnce = request.httpBodyStream != nil && options.bodyFile == nil
        #endif
        delegate.register(transfer, for: task)
        task.resume()
        return TransferHandle(delegate: delegate, taskIdentifier: task.taskIdentifier)
    }

    /// The number of requests the transport still holds (for tests and leak checks): 0 once every
    /// request has ended.
    public var requestsInFlight: Int { delegate.count }
}

/// The handle of a request that ended before anything was sent.
struct NothingToCancel: APICancellable {
    func cancel() {}
}

/// The handle that cancels one request of the transport.
struct TransferHandle: APICancellable {
    let delegate: SessionDelegate
    let taskIdentifier: Int

    /// Cancels the `URLSessionTask` if it is still running; once it has ended, does nothing (the
    /// delegate no longer holds it).
    func cancel() {
        delegate.cancel(taskIdentifier)
    }
}

/// Where a response's body goes, once its head arrived.
enum BodyRoute {
    /// Kept in memory (every response but a download's or a stream's `2xx`).
    case memory
    /// To the sink (``APITransportOptions/responseBody``), which took the head; the pause holds
    /// the task back while a stream's consumer is behind.
    case sink(any APIResponseBodySink, StreamPause)
}

/// Why the transport stopped a request itself.
enum Stop: Equatable {
    /// A redirect was refused, and the attempt fails with this: `URLError(.unsupportedURL)` for a
    /// scheme other than http or https, ``APIHTTPRules/streamBodyRedirectFailure(status:method:sendsStreamOnce:)``
    /// for one that would send a stream body again.
    case refusedRedirect(any Error)
    /// The body passed the request's limit.
    case bodyTooLarge
    /// Past the total or the idle timeout.
    case timedOut
    /// An authentication challenge was rejected (Linux), so the cancellation that follows is the
    /// `401` response.
    case rejectedChallenge
    /// The server was not trusted (Apple platforms, a trust of the app's own): the attempt fails
    /// with this.
    case untrusted(APIEngine.Trust.Failure)

    /// Whether parts that still arrive are dropped (the `401` of a rejected challenge is kept).
    var dropsBody: Bool { self != .rejectedChallenge }

    static func == (lhs: Stop, rhs: Stop) -> Bool {
        switch (lhs, rhs) {
        case (.refusedRedirect, .refusedRedirect), (.bodyTooLarge, .bodyTooLarge), (.timedOut, .timedOut),
            (.rejectedChallenge, .rejectedChallenge):
            return true
        case (.untrusted(let lhs), .untrusted(let rhs)):
            return lhs == rhs
        default:
            return false
        }
    }
}

/// What the transport keeps for one request while it runs.
struct Transfer {
    let requestURL: URL?
    let options: APITransportOptions
    let maxBodySize: Int?
    /// When the attempt times out whatever flows (its total timeout), in uptime nanoseconds; `nil`
    /// for no limit.
    let deadline: UInt64?
    /// The idle timeout, in nanoseconds; `nil` for none.
    let idleLimit: UInt64?
    /// When a byte was last sent or received (or the attempt started), in uptime nanoseconds.
    var lastActivity: UInt64
    let task: URLSessionTask
    let completion: @Sendable (Result<APIRawResponse, any Error>) -> Void
    /// The body received so far.
    var body = Data()
    /// The body's announced length (for progress); `nil` when not announced.
    var expectedBytes: Int64?
    /// Where the body's parts go, once the head said.
    var route = BodyRoute.memory
    /// The bytes handed to the sink so far (for progress).
    var sunk: Int64 = 0
    /// Why the transport stopped the request itself, when it did (the first reason counts): the
    /// attempt ends so, whatever URLSession reports after.
    var stop: Stop?
    /// Whether the body is a stream that cannot be sent again on a redirect (a stream that is not a
    /// file; on Linux, any).
    var sendsStreamOnce = false

    init(
        requestURL: URL?, options: APITransportOptions, timeout: TimeInterval, task: URLSessionTask,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) {
        self.requestURL = requestURL
        self.options = options
        self.maxBodySize = options.maxResponseBodySize.map { max(0, $0) }
        self.task = task
        self.completion = completion
        let now = DispatchTime.now().uptimeNanoseconds
        func nanoseconds(_ seconds: TimeInterval?) -> UInt64? {
            guard let seconds, seconds.isFinite, seconds > 0 else { return nil }
            return UInt64(min(seconds, APIRequestDefaults.maxTimeout) * 1e9)
        }
        self.deadline = nanoseconds(options.totalTimeout).map { now + $0 }
        self.idleLimit = nanoseconds(timeout)
        self.lastActivity = now
    }

    /// Stops the request for `reason`, unless it was stopped already (the first reason counts).
    mutating func stopping(_ reason: Stop) {
        if stop == nil { stop = reason }
    }

    /// Whether the attempt is past its total or idle timeout at `now`; a stream whose consumer holds
    /// the task back is not idle.
    mutating func isPastTimeout(at now: UInt64) -> Bool {
        if let deadline, deadline <= now { return true }
        guard let idleLimit else { return false }
        if case .sink(_, let pause) = route, pause.isHoldingBack {
            lastActivity = now
            return false
        }
        return now >= lastActivity && now - lastActivity >= idleLimit
    }
}

final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: what changes is in `state`, behind its lock; a `URLSessionTask` is thread-safe.
    private let state = LockedState(State())
    #if !canImport(FoundationNetworking)
    /// The trust of the app's own the challenges are answered with; `nil` for the system's.
    let trust: ServerTrustEvaluator?

    init(trust: ServerTrustEvaluator? = nil) {
        self.trust = trust
    }
    #endif

    /// Everything that changes, behind one lock; no completion is called while it is held.
    private struct State {
        /// The requests in flight, by task identifier.
        var transfers: [Int: Transfer] = [:]
        var ticker: (any DispatchSourceTimer)?
    }

    /// How often deadlines are checked while requests are in flight.
    static let tick: DispatchTimeInterval = .milliseconds(50)

    var count: Int { state.withLock { $0.transfers.count } }

    func register(_ transfer: Transfer, for task: URLSessionTask) {
        let newTicker: (any DispatchSourceTimer)? = state.withLock { state in
            state.transfers[task.taskIdentifier] = transfer
            guard transfer.deadline != nil || transfer.idleLimit != nil, state.ticker == nil else { return nil }
            let timer = DispatchSource.makeTimerSource(queue: .global())
            state.ticker = timer
            timer.setEventHandler { [weak self] in self?.checkDeadlines() }
            timer.schedule(deadline: .now() + Self.tick, repeating: Self.tick)
            return timer
        }
        newTicker?.resume()
    }

    /// Cancels, as timed out, every request past its deadline; stops ticking when none is left.
    private func checkDeadlines() {
        let now = DispatchTime.now().uptimeNanoseconds
        let (expired, finishedTicker) = state.withLock { state -> ([URLSessionTask], (any DispatchSourceTimer)?) in
            var expired: [URLSessionTask] = []
            var anyDeadline = false
            for index in state.transfers.indices {
                let transfer = state.transfers.values[index]
                guard transfer.deadline != nil || transfer.idleLimit != nil, transfer.stop == nil else { continue }
                if state.transfers.values[index].isPastTimeout(at: now) {
                    state.transfers.values[index].stop = .timedOut
                    expired.append(transfer.task)
                } else {
                    anyDeadline = true
                }
            }
            guard !anyDeadline else { return (expired, nil) }
            defer { state.ticker = nil }
            return (expired, state.ticker)
        }
        finishedTicker?.cancel()
        for task in expired { task.cancel() }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        let sendable = APIHTTPRules.isSendable(request.url)
        /// What the one locked look at the transfer decides.
        enum Decision {
            /// Not a request of the transport's: as URLSession says.
            case unknown
            /// Refused: the transfer keeps why, and the attempt fails with it.
            case refused
            case follow(requestURL: URL?, options: APITransportOptions)
        }
        let decision = state.withLock { state -> Decision in
            guard let transfer = state.transfers[task.taskIdentifier] else { return .unknown }
            let refusal: (any Error)? =
                sendable
                ? APIHTTPRules.streamBodyRedirectFailure(
                    status: response.statusCode, method: task.currentRequest?.httpMethod,
                    sendsStreamOnce: transfer.sendsStreamOnce)
                : URLError(.unsupportedURL)
            if let refusal {
                state.transfers[task.taskIdentifier]?.stopping(.refusedRedirect(refusal))
                return .refused
            }
            return .follow(requestURL: transfer.requestURL, options: transfer.options)
        }
        let found: (requestURL: URL?, options: APITransportOptions)
        switch decision {
        case .unknown:
            completionHandler(request)
            return
        case .refused:
            completionHandler(nil)
            return
        case .follow(let requestURL, let options):
            found = (requestURL, options)
        }
        // Each hop is judged against the one before it (the request URL of this hop).
        let from = task.currentRequest?.url ?? found.requestURL
        let redirectResponse = APIRawResponse(
            statusCode: response.statusCode, headerSource: ResponseHeaders(response: response), body: Data(),
            url: response.url ?? from)
        completionHandler(
            found.options.redirectRequest(request, from: found.requestURL, redirectResponse: redirectResponse))
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        // A response to a HEAD, and a 1xx, 204 or 304, has no body whatever its Content-Length says
        // (RFC 9110 §6.4.1).
        let status = (response as? HTTPURLResponse)?.statusCode ?? 200
        let bodiless = APIHTTPRules.hasNoBody(method: dataTask.currentRequest?.httpMethod, status: status)
        let declared = bodiless ? 0 : response.expectedContentLength
        let codings = APIHTTPRules.contentCodings(
            (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Encoding"))
        // One locked step: refuse a length past the limit, or say where the body goes (and whom to
        // tell that the head arrived).
        let (tooLarge, sink, headReceived) = state.withLock {
            state -> (URLSessionTask?, (any APIResponseBodySink)?, (@Sendable () -> Void)?) in
            let identifier = dataTask.taskIdentifier
            guard let transfer = state.transfers[identifier] else { return (nil, nil, nil) }
            let headReceived = transfer.options.headReceived
            state.transfers[identifier]?.lastActivity = DispatchTime.now().uptimeNanoseconds
            let limit = transfer.maxBodySize
            let sink = transfer.options.responseBody
            // A compressed body's announced length is not the length of the bytes counted.
            if declared >= 0, codings.isEmpty { state.transfers[identifier]?.expectedBytes = declared }
            // A download's or a stream's 2xx body does not stay in memory: the limit does not apply.
            if sink != nil, (200..<300).contains(status) { return (nil, sink, headReceived) }
            if APIHTTPRules.isRefusedAtHead(announcedLength: declared, codings: codings, limit: limit) {
                state.transfers[identifier]?.stopping(.bodyTooLarge)
                return (dataTask, sink, headReceived)
            }
            if declared > 0 {
                state.transfers[identifier]?.body.reserveCapacity(Int(min(declared, Int64(limit ?? 16 << 20))))
            }
            return (nil, sink, headReceived)
        }
        headReceived?()
        if let tooLarge {
            // The Linux URLSession ignores the disposition, so the task is cancelled as well.
            completionHandler(.cancel)
            tooLarge.cancel()
            return
        }
        if let sink, let http = response as? HTTPURLResponse {
            do {
                if try sink.begin(statusCode: http.statusCode, headers: ResponseHeaders(response: http).allFields()) {
                    state.withLock { $0.transfers[dataTask.taskIdentifier]?.route = .sink(sink, StreamPause()) }
                }
            } catch {
                // The sink keeps the failure; the engine reports it.
                completionHandler(.cancel)
                dataTask.cancel()
                return
            }
        }
        completionHandler(.allow)
    }

    /// Where a part of a body goes, decided in one locked step.
    private enum Destination {
        typealias Progress = (report: APITransferProgress.Reporter, bytes: Int64, expected: Int64?)
        /// Kept in memory (the common case); `tooLarge` is the task to cancel past the limit.
        case memory(tooLarge: URLSessionTask?, progress: Progress?)
        /// To the sink (a download's file, a stream's consumer); `progress.bytes` counts what went
        /// there with this part.
        case sink(any APIResponseBodySink, StreamPause, progress: Progress?)
        case nowhere
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let destination = state.withLock { state -> Destination in
            let identifier = dataTask.taskIdentifier
            // Fields are read in place: a copy of the transfer would share its body, and the append
            // below would then copy the whole body every time (quadratic).
            guard let index = state.transfers.index(forKey: identifier),
                state.transfers.values[index].stop?.dropsBody != true
            else { return .nowhere }
            state.transfers.values[index].lastActivity = DispatchTime.now().uptimeNanoseconds
            let options = state.transfers.values[index].options
            let expected = state.transfers.values[index].expectedBytes
            if case .sink(let sink, let pause) = state.transfers.values[index].route {
                state.transfers.values[index].sunk += Int64(data.count)
                let sunk = state.transfers.values[index].sunk
                return .sink(sink, pause, progress: options.progress.map { ($0, sunk, expected) })
            }
            let received = state.transfers.values[index].body.count + data.count
            if let limit = state.transfers.values[index].maxBodySize, received > limit {
                state.transfers.values[index].stopping(.bodyTooLarge)
                state.transfers.values[index].body = Data()
                return .memory(tooLarge: dataTask, progress: nil)
            }
            state.transfers.values[index].body.append(data)
            return .memory(tooLarge: nil, progress: options.progress.map { ($0, Int64(received), expected) })
        }
        switch destination {
        case .memory(let tooLarge, let progress):
            tooLarge?.cancel()
            if let progress { progress.report(.download, progress.bytes, progress.expected) }
        case .sink(let sink, let pause, let progress):
            let goOn: Bool
            do {
                goOn = try sink.write(data) { pause.ready(dataTask) }
            } catch {
                dataTask.cancel()  // the sink keeps the failure; the engine reports it
                return
            }
            #if !canImport(FoundationNetworking)
            if !goOn { pause.pause(dataTask) }
            #else
            // On Linux a suspended running task reads on regardless, and may never resume: the
            // body is not held back there; a stream keeps what is past its memory limit in a
            // temporary file (see the README's note on streamed responses).
            _ = goOn
            #endif
            if let progress { progress.report(.download, progress.bytes, progress.expected) }
        case .nowhere:
            break
        }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        let report = state.withLock { state in
            state.transfers[task.taskIdentifier]?.lastActivity = DispatchTime.now().uptimeNanoseconds
            return state.transfers[task.taskIdentifier]?.options.progress
        }
        report?(.upload, totalBytesSent, totalBytesExpectedToSend > 0 ? totalBytesExpectedToSend : nil)
    }

    /// A redirect that keeps the body (`307`, `308`) of a file upload: the file is read again.
    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping (InputStream?) -> Void
    ) {
        let file = state.withLock { $0.transfers[task.taskIdentifier]?.options.bodyFile }
        completionHandler(file.flatMap { InputStream(url: $0) })
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        finish(task.taskIdentifier, response: task.response, error: error)
    }

    #if !canImport(FoundationNetworking)
    /// The exchange's phases, for the engine's observers (FoundationNetworking on Linux never calls
    /// this). Apple calls it before the task's completion.
    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        guard let options = state.withLock({ $0.transfers[task.taskIdentifier]?.options }),
            let transaction = metrics.transactionMetrics.last
        else { return }
        if let told = options.protocolVersionReceived,
            let version = Self.protocolVersion(transaction.networkProtocolName)
        {
            told(version)
        }
        guard let measured = options.phasesMeasured else { return }
        func span(_ start: Date?, _ end: Date?) -> TimeInterval? {
            guard let start, let end else { return nil }
            return end.timeIntervalSince(start)
        }
        measured(
            APIEngine.AttemptReport.Phases(
                domainLookup: span(transaction.domainLookupStartDate, transaction.domainLookupEndDate),
                connect: span(transaction.connectStartDate, transaction.connectEndDate),
                secureConnection: span(transaction.secureConnectionStartDate, transaction.secureConnectionEndDate),
                request: span(transaction.requestStartDate, transaction.requestEndDate),
                waiting: span(transaction.requestEndDate, transaction.responseStartDate),
                response: span(transaction.responseStartDate, transaction.responseEndDate),
                reusedConnection: transaction.isReusedConnection))
    }
    #endif

    /// OpenTelemetry's `network.protocol.version` for an ALPN protocol name as
    /// `URLSessionTaskMetrics` gives it (`http/1.1`, `h2`, `h3`); `nil` for a name it does not know.
    static func protocolVersion(_ name: String?) -> String? {
        switch name?.lowercased() {
        case "http/1.0": return "1.0"
        case "http/1.1": return "1.1"
        case "h2", "h2c": return "2"
        case let name? where name == "h3" || name.hasPrefix("h3-"): return "3"
        default: return nil
        }
    }

    /// On Linux, `.performDefaultHandling` leaves the task waiting forever and `.useCredential`
    /// without a credential crashes, so the challenge is rejected there and the cancellation that
    /// follows is turned back into the `401` response.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
        state.withLock { $0.transfers[task.taskIdentifier]?.stopping(.rejectedChallenge) }
        completionHandler(.rejectProtectionSpace, nil)
        #else
        guard let trust else { return completionHandler(.performDefaultHandling, nil) }
        switch trust.answer(challenge) {
        case .untrusted(let failure):
            state.withLock { $0.transfers[task.taskIdentifier]?.stopping(.untrusted(failure)) }
            completionHandler(.cancelAuthenticationChallenge, nil)
        case .use(let credential):
            completionHandler(.useCredential, credential)
        case .defaultHandling:
            completionHandler(.performDefaultHandling, nil)
        }
        #endif
    }

    func cancel(_ taskIdentifier: Int) {
        state.withLock { $0.transfers[taskIdentifier]?.task }?.cancel()
    }

    /// Ends the request: its completion is called once, with what the delegate gathered.
    func finish(_ taskIdentifier: Int, response: URLResponse?, error: (any Error)?) {
        guard let transfer = state.withLock({ $0.transfers.removeValue(forKey: taskIdentifier) }) else { return }
        let completion = transfer.completion
        let body = transfer.body
        switch transfer.stop {
        case .refusedRedirect(let refusal):
            completion(.failure(refusal))
            return
        case .bodyTooLarge:
            completion(.failure(APIError.responseTooLarge(limit: transfer.maxBodySize ?? 0)))
            return
        case .timedOut:
            completion(.failure(URLError(.timedOut)))
            return
        case .untrusted(let failure):
            completion(.failure(failure))
            return
        case .rejectedChallenge, nil:
            break
        }
        let rejectedChallenge = transfer.stop == .rejectedChallenge
        let http = response as? HTTPURLResponse
        if let error {
            let code = (error as? URLError)?.code
            // A rejected challenge ends as a cancellation; the 401 it answered is the response.
            if rejectedChallenge, code == .cancelled, let http {
                completion(.success(Self.rawResponse(http, body: body)))
            } else if code == .unknown, let http, !Self.decodes(http.value(forHTTPHeaderField: "Content-Encoding")) {
                // libcurl refuses a body in a coding it does not know; the Linux URLSession calls it
                // unknown.
                completion(.failure(URLError(.cannotDecodeContentData, userInfo: [NSUnderlyingErrorKey: error])))
            } else if code == .unknown, http != nil {
                // The head arrived and then the connection closed: the Linux URLSession calls it
                // unknown; it is a lost connection.
                completion(.failure(URLError(.networkConnectionLost, userInfo: [NSUnderlyingErrorKey: error])))
            } else {
                completion(.failure(error))
            }
            return
        }
        guard let http else {
            completion(.failure(URLError(.badServerResponse)))
            return
        }
        completion(.success(Self.rawResponse(http, body: body)))
    }

    /// Whether URLSession decodes a body in these content codings (gzip, deflate, br and zstd, as
    /// libcurl builds usually do, and identity).
    static func decodes(_ contentEncoding: String?) -> Bool {
        APIHTTPRules.contentCodings(contentEncoding).allSatisfy {
            ["gzip", "x-gzip", "deflate", "br", "zstd"].contains($0)
        }
    }

    private static func rawResponse(_ http: HTTPURLResponse, body: Data) -> APIRawResponse {
        APIRawResponse(
            statusCode: http.statusCode, headerSource: ResponseHeaders(response: http), body: body, url: http.url)
    }
}

/// The headers of an `HTTPURLResponse`, read when asked for: `allHeaderFields` builds a new
/// dictionary of `AnyHashable` keys on every call on Linux, which costs more than the rest of the
/// transport's work for a small response, and most responses are decoded without a header read.
struct ResponseHeaders: APIHeaderSource, @unchecked Sendable {
    // @unchecked: the response is never mutated once URLSession has delivered it.
    let response: HTTPURLResponse

    func allFields() -> [String: String] {
        let fields = response.allHeaderFields
        var headers: [String: String] = [:]
        headers.reserveCapacity(fields.count)
        for (key, value) in fields {
            let name = key.base as? String ?? String(describing: key.base)
            headers[name] = value as? String ?? String(describing: value)
        }
        return headers
    }

    func value(forHeader name: String) -> String? {
        response.value(forHTTPHeaderField: name)
    }
}

/// Suspends a streaming task while its consumer is behind and resumes it when the consumer has
/// caught up, whichever of the two comes first. Apple platforms only: on Linux, FoundationNetworking
/// goes on reading a suspended task and its resume can leave it stalled.
final class StreamPause: Sendable {
    private struct State {
        var suspended = false
        var readyEarly = false
    }

    private let state = LockedState(State())

    /// The consumer is behind: the task is suspended, unless it caught up already.
    func pause(_ task: URLSessionTask) {
        state.withLock { state in
            if state.readyEarly {
                state.readyEarly = false
                return
            }
            state.suspended = true
            task.suspend()
        }
    }

    /// Whether the task is suspended because the consumer is behind (its idle time does not count).
    var isHoldingBack: Bool { state.withLock { $0.suspended } }

    /// The consumer caught up: a suspended task resumes.
    func ready(_ task: URLSessionTask) {
        state.withLock { state in
            if state.suspended {
                state.suspended = false
                task.resume()
            } else {
                state.readyEarly = true
            }
        }
    }
}
