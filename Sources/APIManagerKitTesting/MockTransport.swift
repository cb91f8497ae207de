import APIManagerKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transport that answers from a script instead of the network, and records what it was asked.
///
/// Routes match by method (any when `nil`) and URL path; a route answers with its replies in turn,
/// repeating the last. A reply can carry a latency, counted on the transport's clock (a `TestClock`
/// in tests), or be held until the test releases it. A reply with neither completes inside `send`.
/// A request that no route matches fails with ``UnmatchedRequest``, which names its method, its URL
/// and the routes there are (or gets ``unmatchedReply``, when set).
///
/// Cancelling a pending request completes it with `URLError(.cancelled)`, as `URLSession` does, and is
/// recorded.
public final class MockTransport: APITransport, @unchecked Sendable {
    // @unchecked: all mutable state is in `state`, read and written only under `lock`.

    /// One scripted answer.
    public struct Reply: Sendable {
        /// The response, or the error the transport fails with.
        public var result: Result<APIRawResponse, URLError>
        /// Seconds on the transport's clock before the reply arrives. `0` unless set.
        public var latency: TimeInterval = 0
        /// Whether the reply waits for ``MockTransport/release(path:with:)``. `false` unless set.
        public var isHeld = false
        /// In how many chunks the body arrives, one every ``chunkInterval`` seconds after the
        /// latency (each reported as download progress). `1` unless set with ``inChunks(_:every:)``.
        public var chunks = 1
        /// Seconds between two chunks of the body. `0` unless set.
        public var chunkInterval: TimeInterval = 0
        /// Where the body is cut: after this many bytes the connection drops and the request fails
        /// with `URLError(.networkConnectionLost)`. `nil` unless set with ``cut(after:)``.
        public var cutAfterBytes: Int?
        /// Seconds the request's body takes to go, in ``uploadSteps`` steps reported as upload
        /// progress, before the latency starts. `0` unless set with ``uploading(over:steps:)``.
        public var uploadDuration: TimeInterval = 0
        /// In how many steps the request's body goes. `4` unless set.
        public var uploadSteps = 4

        /// A reply; use the static builders (`status`, `json`, `failure`) and `after`/`held`.
        public init(result: Result<APIRawResponse, URLError>, latency: TimeInterval = 0, isHeld: Bool = false) {
            self.result = result
            self.latency = latency
            self.isHeld = isHeld
        }

        /// A response with this status, headers and body.
        public static func status(_ code: Int, headers: [String: String] = [:], body: Data = Data()) -> Reply {
            Reply(result: .success(APIRawResponse(statusCode: code, headers: headers, body: body)))
        }

        /// A JSON response (`Content-Type: application/json`).
        public static func json(_ text: String, status: Int = 200, headers: [String: String] = [:]) -> Reply {
            var headers = headers
            headers["Content-Type"] = "application/json"
            return .status(status, headers: headers, body: Data(text.utf8))
        }

        /// A transport failure.
        public static func failure(_ code: URLError.Code) -> Reply {
            Reply(result: .failure(URLError(code)))
        }

        /// The same reply, arriving `seconds` later on the transport's clock.
        public func after(_ seconds: TimeInterval) -> Reply {
            var copy = self
            copy.latency = seconds
            return copy
        }

        /// The same reply, its body arriving in `count` chunks, one every `interval` seconds after the
        /// latency, each reported as download progress; the reply completes with the last.
        public func inChunks(_ count: Int, every interval: TimeInterval) -> Reply {
            var copy = self
            copy.chunks = max(1, count)
            copy.chunkInterval = max(0, interval)
            return copy
        }

        /// The same reply, its body cut after `bytes` bytes: the chunks up to there arrive (and are
        /// reported), then the request fails with `URLError(.networkConnectionLost)`.
        public func cut(after bytes: Int) -> Reply {
            var copy = self
            copy.cutAfterBytes = max(0, bytes)
            return copy
        }

        /// The same reply, the request's body taking `seconds` to go, reported as upload progress in
        /// `steps` equal steps, before the latency starts.
        public func uploading(over seconds: TimeInterval, steps: Int = 4) -> Reply {
            var copy = self
            copy.uploadDuration = max(0, seconds)
            copy.uploadSteps = max(1, steps)
            return copy
        }

        /// Whether the reply plays out step by step (chunks, a cut, an upload).
        var isStaged: Bool { chunks > 1 || cutAfterBytes != nil || uploadDuration > 0 }

        /// The same reply, held until released.
        public func held() -> Reply {
            var copy = self
            copy.isHeld = true
            return copy
        }
    }

    /// What happened to one request.
    public struct Record: Sendable {
        /// Where the request stands.
        public enum Outcome: Sendable, Equatable {
            /// Waiting for its latency to pass.
            case pending
            /// Waiting to be released.
            case held
            /// Answered.
            case completed
            /// Cancelled before it was answered.
            case cancelled
        }
        /// 1 for the first request the transport saw, and so on.
        public let number: Int
        /// The request as the transport received it; a body streamed from a file (`httpBodyStream`) was read
        /// whole into its `httpBody`, as a server would have.
        public let request: URLRequest
        /// Where it stands now.
        public var outcome: Outcome
        /// The clock's time when the request arrived.
        public let sentAt: TimeInterval
        /// The clock's time when it completed or was cancelled.
        public var endedAt: TimeInterval?
        /// What the engine told the transport beside the request (its total timeout, body limit…).
        public var options = APITransportOptions()
        /// The request as the engine handed it over (an `APIHTTPRequest`: fields in order, the body as
        /// it was given); `nil` for a request sent as a `URLRequest`.
        public var httpRequest: APIHTTPRequest?

        /// The request's method (`GET` when unset).
        public var method: String { request.httpMethod ?? "GET" }
        /// The path of the request's URL.
        public var path: String { request.url?.path ?? "" }
    }

    private struct Route {
        let method: HTTPMethod?
        let path: String
        var replies: [Reply]
        let handler: (@Sendable (URLRequest) -> Reply)?
        /// How many requests it answered.
        var used = 0

        mutating func nextReply(for request: URLRequest) -> Reply? {
            if let handler { return handler(request) }
            guard let first = replies.first else { return nil }
            if replies.count > 1 { replies.removeFirst() }
            return first
        }
    }

    private struct Pending {
        let number: Int
        var reply: Reply
        let completion: @Sendable (Result<APIRawResponse, any Error>) -> Void
        var timer: (any APICancellable)?
    }

    private struct State {
        var routes: [Route] = []
        /// The stubs made with a ``Match``, tried first, in the order they were added.
        var matchStubs: [MatchStub] = []
        var records: [Record] = []
        var pending: [Int: Pending] = [:]
        var unmatchedReply: Reply?
        var protocolVersion: String?
        /// Where a request no stub answers goes instead of failing, and the recorder of those
        /// exchanges (``replay(_:timing:sendingMissesWith:into:)``).
        var misses: MissPassage?
    }

    private let lock = NSLock()
    private var state = State()
    /// The clock latencies are counted on.
    public let clock: any APIClock

    /// - Parameter clock: where latencies are counted; a real `DispatchClock` unless given.
    public init(clock: any APIClock = DispatchClock()) {
        self.clock = clock
    }

    /// The HTTP version each response is said to come in (`APITransportOptions.protocolVersionReceived`),
    /// as a real transport would tell it (`1.1`, `2`); `nil`, the default, tells none.
    public var protocolVersion: String? {
        get { lock.withLock { state.protocolVersion } }
        set { lock.withLock { state.protocolVersion = newValue } }
    }

    // MARK: Script

    /// Answers requests with this method (any when `nil`) and path with `replies` in turn, repeating
    /// the last. A later route for the same method and path replaces the earlier one.
    public func stub(_ method: HTTPMethod? = nil, _ path: String, _ replies: Reply...) {
        stub(method, path, replies: replies)
    }

    /// The same, with the replies in an array.
    public func stub(_ method: HTTPMethod? = nil, _ path: String, replies: [Reply]) {
        addRoute(Route(method: method, path: path, replies: replies, handler: nil))
    }

    /// Answers requests with this method (any when `nil`) and path with whatever `handler` returns.
    public func stub(_ method: HTTPMethod? = nil, _ path: String, handler: @escaping @Sendable (URLRequest) -> Reply) {
        addRoute(Route(method: method, path: path, replies: [], handler: handler))
    }

    /// The answer to a request no route matches, in place of failing it with ``UnmatchedRequest``.
    /// Unset unless set (reading it then gives `404 "no route"`, the answer before 1.1).
    public var unmatchedReply: Reply {
        get { lock.withLock { state.unmatchedReply } ?? .status(404, body: Data("no route".utf8)) }
        set { lock.withLock { state.unmatchedReply = newValue } }
    }

    /// What a request no route matches fails with (unless ``unmatchedReply`` is set): the engine
    /// ends its attempt with `APIError.transport(underlying:)` carrying it, never retried.
    ///
    /// ```
    /// no stub matches GET https://api.test/items?page=2; the stubs: GET /item, any /users
    /// ```
    public struct UnmatchedRequest: LocalizedError, CustomStringConvertible, Sendable {
        /// The request's method.
        public let method: String
        /// The request's URL.
        public let url: URL?
        /// The routes there were, as `METHOD /path` (`any` for a route of every method), in the
        /// order they were added.
        public let stubs: [String]

        public var description: String {
            let url = url.map { APISecrets.redacted($0) } ?? "(no URL)"
            let stubs = stubs.isEmpty ? "there is none" : "the stubs: " + stubs.joined(separator: ", ")
            return "no stub matches \(method) \(url); \(stubs)"
        }

        /// The same sentence, for `APIError`'s description and `localizedDescription`.
        public var errorDescription: String? { description }
    }

    /// Answers requests `match` describes with `replies` in turn, repeating the last; `times`: how
    /// many requests it answers (any number when `nil`), after which it no longer matches. Stubs made
    /// with a match are tried before the path stubs, in the order they were added: the first that
    /// matches answers.
    public func stub(_ match: Match, times: Int? = nil, _ replies: Reply...) {
        stub(match, times: times, replies: replies)
    }

    /// The same, with the replies in an array.
    public func stub(_ match: Match, times: Int? = nil, replies: [Reply]) {
        lock.withLock {
            state.matchStubs.append(
                MatchStub(
                    match: match, times: times,
                    route: Route(method: match.method, path: match.path ?? "", replies: replies, handler: nil)))
        }
    }

    /// Answers requests `match` describes with whatever `handler` returns (`times` as above).
    public func stub(_ match: Match, times: Int? = nil, handler: @escaping @Sendable (URLRequest) -> Reply) {
        lock.withLock {
            state.matchStubs.append(
                MatchStub(
                    match: match, times: times,
                    route: Route(method: match.method, path: match.path ?? "", replies: [], handler: handler)))
        }
    }

    /// The stubs that answered fewer requests than they were made for: none for a stub without
    /// `times` that answered one or more, else the shortfall, as `GET /items (answered 0 of 2)`.
    /// A test that expects every stub to be used checks that this is empty.
    public var unusedStubs: [String] {
        lock.withLock {
            state.matchStubs.compactMap { stub in
                let wanted = stub.times ?? 1
                return stub.route.used < wanted ? "\(stub.match) (answered \(stub.route.used) of \(wanted))" : nil
            }
                + state.routes.filter { $0.used == 0 }.map {
                    "\($0.method?.rawValue ?? "any") \($0.path) (answered 0 of 1)"
                }
        }
    }

    private struct MatchStub {
        let match: Match
        let times: Int?
        var route: Route
    }

    private func addRoute(_ route: Route) {
        lock.withLock {
            state.routes.removeAll { $0.method == route.method && $0.path == route.path }
            state.routes.append(route)
        }
    }

    // MARK: Inspection

    /// Every request seen, in order, with what became of it.
    public var records: [Record] { lock.withLock { state.records } }
    /// Every request seen, in order.
    public var requests: [URLRequest] { records.map(\.request) }
    /// The requests that were cancelled while pending, in the order they arrived.
    public var cancelledRequests: [URLRequest] { records.filter { $0.outcome == .cancelled }.map(\.request) }
    /// The number of requests held and not yet released or cancelled.
    public var heldCount: Int { lock.withLock { state.pending.values.filter(\.reply.isHeld).count } }
    /// The number of requests not yet completed or cancelled.
    public var pendingCount: Int { lock.withLock { state.pending.count } }

    // MARK: Control

    /// Completes the oldest held request (whose path is `path`, when given), with `reply` if given,
    /// else with its scripted reply. Returns `false` when no held request matches.
    @discardableResult
    public func release(path: String? = nil, with reply: Reply? = nil) -> Bool {
        let released: Pending? = lock.withLock {
            let candidates = state.pending.values
                .filter { $0.reply.isHeld && (path == nil || state.records[$0.number - 1].path == path) }
            guard let oldest = candidates.min(by: { $0.number < $1.number }) else { return nil }
            return state.pending[oldest.number]
        }
        guard var pending = released else { return false }
        if let reply { pending.reply.result = reply.result }
        finish(number: pending.number, with: pending.reply.result)
        return true
    }

    /// Completes every held request with its scripted reply, oldest first.
    public func releaseAll() {
        while release() {}
    }

    // MARK: APITransport

    /// Answers from the script; a staged reply (``Reply/inChunks(_:every:)``, ``Reply/cut(after:)``,
    /// ``Reply/uploading(over:steps:)``) plays out on the clock, reporting its progress to
    /// `options.progress`. A held reply is answered whole when released. The record keeps the
    /// request as given (``Record/httpRequest``) and as a `URLRequest` (``Record/request``).
    public func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        var options = options
        if case .file(let file) = request.body { options.bodyFile = file }
        if case .writer(let writer) = request.body { options.bodyWriter = writer }
        if let totalTimeout = request.totalTimeout { options.totalTimeout = totalTimeout }
        return answer(request.urlRequest, as: request, options: options, completion: completion)
    }

    /// Answers a `URLRequest` from the script: at once, after the reply's latency, or when released.
    public func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        answer(request, as: nil, options: APITransportOptions(), completion: completion)
    }

    /// Answers a `URLRequest` from the script, as ``send(_:options:completion:)`` does.
    public func send(
        _ request: URLRequest,
        options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        answer(request, as: nil, options: options, completion: completion)
    }

    private func answer(
        _ request: URLRequest, as given: APIHTTPRequest?, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let now = clock.now
        // The head of a response arrives with it (APITransportOptions.headReceived), just before.
        let version = options.protocolVersionReceived == nil ? nil : protocolVersion
        let completion = Self.reportingHead(
            options.headReceived,
            version: version.flatMap { version in options.protocolVersionReceived.map { ($0, version) } },
            then: completion)
        // As a real transport: a URL without a scheme (a relative request on an engine without a
        // base URL) cannot be sent; nothing is recorded.
        if let url = request.url, url.scheme == nil {
            completion(.failure(URLError(.unsupportedURL)))
            return Cancellation(transport: nil, number: 0)
        }
        // A streamed body (a file) is read as a server would, so the record shows its bytes.
        var request = request
        if let stream = request.httpBodyStream {
            let body = Self.readAll(stream)
            request.httpBodyStream = nil  // clears `httpBody` too: set it after
            request.httpBody = body
        }
        let (number, reply, unmatched, miss): (Int, Reply, UnmatchedRequest?, MissPassage?) = lock.withLock {
            let number = state.records.count + 1
            var record = Record(number: number, request: request, outcome: .pending, sentAt: now)
            record.options = options
            record.httpRequest = given
            state.records.append(record)
            let path = request.url?.path ?? ""
            let method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
            var matched: Reply?
            if let stub = state.matchStubs.firstIndex(where: { stub in
                stub.times.map { stub.route.used < $0 } ?? true && stub.match.matches(request)
            }) {
                matched = state.matchStubs[stub].route.nextReply(for: request)
                state.matchStubs[stub].route.used += 1
            } else if let index = state.routes.lastIndex(where: {
                $0.path == path && ($0.method == nil || $0.method == method)
            }) {
                matched = state.routes[index].nextReply(for: request)
                state.routes[index].used += 1
            }
            if matched == nil, let misses = state.misses {
                return (number, Reply.status(404), nil, misses)
            }
            guard let reply = matched ?? state.unmatchedReply else {
                state.records[number - 1].outcome = .completed
                state.records[number - 1].endedAt = now
                let unmatched = UnmatchedRequest(
                    method: method.rawValue, url: request.url,
                    stubs: state.matchStubs.map { "\($0.match)" }
                        + state.routes.map { "\($0.method?.rawValue ?? "any") \($0.path)" })
                return (number, Reply.status(404), unmatched, nil)
            }
            if reply.isHeld || reply.latency > 0 {
                state.pending[number] = Pending(number: number, reply: reply, completion: completion, timer: nil)
                if reply.isHeld { state.records[number - 1].outcome = .held }
            }
            return (number, reply, nil, nil)
        }
        if let miss {
            return sendMiss(request, as: given, number: number, options: options, through: miss, completion: completion)
        }
        let cancellable = Cancellation(transport: self, number: number)
        if let unmatched {
            completion(.failure(unmatched))
            return cancellable
        }
        if reply.isHeld { return cancellable }
        if reply.isStaged {
            lock.withLock {
                state.pending[number] = Pending(number: number, reply: reply, completion: completion, timer: nil)
            }
            let response = try? reply.result.get()
            play(
                Self.stages(of: reply, uploading: Int64(request.httpBody?.count ?? 0)), number: number,
                options: options, response: response, written: 0)
            return cancellable
        }
        if reply.latency > 0 {
            let timer = clock.schedule(after: reply.latency) { [weak self] in
                self?.finish(number: number, with: reply.result)
            }
            let stillPending = lock.withLock {
                state.pending[number]?.timer = timer
                return state.pending[number] != nil
            }
            if !stillPending { timer.cancel() }
            return cancellable
        }
        lock.withLock {
            state.records[number - 1].outcome = .completed
            state.records[number - 1].endedAt = now
        }
        completion(reply.result.mapError { $0 })
        return cancellable
    }

    /// `completion`, telling `headReceived` first when it answers with a response.
    private static func reportingHead(
        _ headReceived: (@Sendable () -> Void)?, version: ((@Sendable (String) -> Void), String)?,
        then completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> @Sendable (Result<APIRawResponse, any Error>) -> Void {
        guard headReceived != nil || version != nil else { return completion }
        return { result in
            if case .success = result {
                headReceived?()
                if let (told, version) = version { told(version) }
            }
            completion(result)
        }
    }

    private static func readAll(_ stream: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        stream.open()
        defer { stream.close() }
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count <= 0 { return data }
            data.append(buffer, count: count)
        }
    }

    /// One step of a staged reply: after `delay` seconds, report progress, or end.
    private enum Stage {
        case progress(after: TimeInterval, APITransferProgress.Direction, Int64, of: Int64?)
        case end(after: TimeInterval, Result<APIRawResponse, URLError>)
    }

    private static func stages(of reply: Reply, uploading bodyBytes: Int64) -> [Stage] {
        var stages: [Stage] = []
        if reply.uploadDuration > 0, bodyBytes > 0 {
            let step = reply.uploadDuration / Double(reply.uploadSteps)
            for index in 1...reply.uploadSteps {
                stages.append(
                    .progress(after: step, .upload, bodyBytes * Int64(index) / Int64(reply.uploadSteps), of: bodyBytes))
            }
        }
        guard case .success(let response) = reply.result else {
            return stages + [.end(after: reply.latency, reply.result)]
        }
        let total = response.body.count
        let expected = Int64(total)
        let limit = min(total, reply.cutAfterBytes ?? total)
        var delay = reply.latency
        var previous = 0
        for index in 1...reply.chunks {
            let bytes = min(limit, total * index / reply.chunks)
            if bytes > previous {
                stages.append(.progress(after: delay, .download, Int64(bytes), of: expected))
                delay = 0
                previous = bytes
            }
            if bytes >= limit { break }
            delay += reply.chunkInterval
        }
        if reply.cutAfterBytes.map({ $0 < total }) == true {
            return stages + [.end(after: 0, .failure(URLError(.networkConnectionLost)))]
        }
        return stages + [.end(after: delay == reply.latency ? delay : 0, reply.result)]
    }

    /// Plays the stages on the clock, one timer at a time; a cancelled request stops them. A
    /// download's body goes to its file chunk by chunk, so a cut leaves the part that arrived.
    private func play(
        _ stages: [Stage], number: Int, options: APITransportOptions, response: APIRawResponse?, written: Int
    ) {
        guard let stage = stages.first else { return }
        let rest = Array(stages.dropFirst())
        let delay: TimeInterval
        switch stage {
        case .progress(let after, _, _, _), .end(let after, _): delay = after
        }
        let run: @Sendable () -> Void = { [weak self] in
            guard let self, self.lock.withLock({ self.state.pending[number] != nil }) else { return }
            switch stage {
            case .progress(_, let direction, let bytes, let expected):
                // A download's or a stream's body goes to its sink chunk by chunk, honouring its
                // backpressure; a body the sink does not take arrives whole at the end.
                guard direction == .download, written >= 0, let sink = options.responseBody, let response else {
                    options.progress?(direction, bytes, expected)
                    self.play(rest, number: number, options: options, response: response, written: written)
                    return
                }
                do {
                    if written == 0, try !sink.begin(statusCode: response.statusCode, headers: response.headers) {
                        options.progress?(direction, bytes, expected)
                        self.play(rest, number: number, options: options, response: response, written: -1)
                        return
                    }
                    let next = Int(bytes)
                    let goOn = try sink.write(response.body.subdata(in: written..<next)) { [weak self] in
                        self?.play(rest, number: number, options: options, response: response, written: next)
                    }
                    options.progress?(direction, bytes, expected)
                    if goOn { self.play(rest, number: number, options: options, response: response, written: next) }
                } catch {
                    self.finish(number: number, with: .failure(URLError(.cannotWriteToFile)))
                }
            case .end(_, let result):
                self.finish(number: number, with: result)
            }
        }
        if delay <= 0 {
            run()
            return
        }
        let timer = clock.schedule(after: delay, run)
        let stillPending = lock.withLock {
            state.pending[number]?.timer = timer
            return state.pending[number] != nil
        }
        if !stillPending { timer.cancel() }
    }

    private func finish(number: Int, with result: Result<APIRawResponse, URLError>) {
        let now = clock.now
        let pending: Pending? = lock.withLock {
            guard let pending = state.pending.removeValue(forKey: number) else { return nil }
            state.records[number - 1].outcome = .completed
            state.records[number - 1].endedAt = now
            return pending
        }
        pending?.completion(result.mapError { $0 })
    }

    fileprivate func cancel(number: Int) {
        let now = clock.now
        let pending: Pending? = lock.withLock {
            guard let pending = state.pending.removeValue(forKey: number) else { return nil }
            state.records[number - 1].outcome = .cancelled
            state.records[number - 1].endedAt = now
            return pending
        }
        guard let pending else { return }
        pending.timer?.cancel()
        pending.completion(.failure(URLError(.cancelled)))
    }

    private struct Cancellation: APICancellable {
        weak var transport: MockTransport?
        let number: Int
        func cancel() { transport?.cancel(number: number) }
    }
}

// MARK: Misses sent on

/// Where a request no stub answered goes (``MockTransport/replay(_:timing:sendingMissesWith:into:)``).
struct MissPassage {
    let transport: any APITransport
    let recorder: APIEngine.HARRecorder
}

extension MockTransport {
    func sendMisses(with live: any APITransport, into recorder: APIEngine.HARRecorder) {
        lock.withLock { state.misses = MissPassage(transport: live, recorder: recorder) }
    }

    func markCompleted(_ number: Int) {
        let now = clock.now
        lock.withLock {
            state.records[number - 1].outcome = .completed
            state.records[number - 1].endedAt = now
        }
    }

    /// Sends a request no stub answered with the live transport, records the exchange, and marks
    /// the record completed when it ends.
    func sendMiss(
        _ request: URLRequest, as given: APIHTTPRequest?, number: Int, options: APITransportOptions,
        through miss: MissPassage, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let sent = Date()
        let started = DispatchTime.now().uptimeNanoseconds
        let recorded: @Sendable (Result<APIRawResponse, any Error>) -> Void = { [weak self] result in
            let duration = TimeInterval(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            miss.recorder.record(request, result: result, sent: sent, duration: duration)
            self?.markCompleted(number)
            completion(result)
        }
        if let given {
            return miss.transport.send(given, options: options, completion: recorded)
        }
        return miss.transport.send(request, options: options, completion: recorded)
    }
}
