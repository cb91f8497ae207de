import APIManagerKit
import Foundation
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Traces what an engine does with swift-distributed-tracing: a span per task (`APIManagerKit
/// task`, a child of the sender's `ServiceContext.current`), and under it a client span per
/// request on the wire, named and attributed as OpenTelemetry's HTTP client conventions say
/// (named by its method, `HTTP` for a method the conventions do not know; `http.request.method`,
/// `http.request.method_original`, `url.full` with its secrets redacted, `server.address`,
/// `server.port`, `http.response.status_code`, `error.type`, `http.request.resend_count`,
/// `network.protocol.version` when the transport tells it), whose
/// context the tracer's propagation puts into the request (with swift-otel, `traceparent` and
/// `tracestate`) just before it goes on the wire: on every attempt, a retry and a request sent
/// again after a refreshed credential included.
///
/// - A request the transport sends again on a redirect is part of its attempt: one client span
///   covers an attempt with the redirects the transport followed (they carry its context).
/// - An answer from the cache sends nothing: no client span; the task's span says where its
///   response came from (`apimanager.response.source`: `network`, `cache` or `revalidated`).
/// - A request that joins an identical one in flight (``APIConcurrencyPolicy/Sharing``) sends
///   nothing of its own: no client span; its task's span gets a link to the client span of the
///   request it joined. The trace context does not tell identical requests apart.
/// - A failed attempt or task records its error as the library describes it (its kind and status,
///   never what the server wrote) and an error status; `recordsServerMessages` records the whole
///   error instead.
/// - Every span is ended once, also when its task is cancelled while the request is on the wire,
///   whatever order the observations come in.
///
/// It is an observer: give it to the engine's observers.
///
/// ```swift
/// let tracing = TracingInterceptor()   // InstrumentationSystem.tracer, as bootstrapped
/// var configuration = APIEngine.Configuration()
/// configuration.observers = [tracing]
/// ```
public final class TracingInterceptor: APIEngine.Observer, APIRequestAdapter, @unchecked Sendable {
    // @unchecked: `tasks` and `endedFirst` are read and written only under `lock`; the rest never
    // changes.
    private let tracer: any Tracer
    private let recordsServerMessages: Bool
    private let lock = NSLock()
    private var tasks: [ObjectIdentifier: TaskSpans] = [:]
    /// Tasks whose end was told before their start (kept with the task, so that the identity
    /// stays theirs): their span ends as soon as it starts.
    private var endedFirst: [ObjectIdentifier: (task: AnyAPITask, result: Result<APIResponseCache.Source, APIError>)] =
        [:]

    /// A task's span, and the spans of its requests on the wire, by attempt.
    private struct TaskSpans {
        let span: any Span
        let identifier: UInt64
        var requests: [Int: any Span] = [:]
        /// The last request's span, for a request that joins this task's.
        var lastRequest: (any Span)?
        /// How many requests went on the wire before (`http.request.resend_count`).
        var sent = 0
    }

    /// The name of a task's span.
    public static let taskSpanName = "APIManagerKit task"

    /// - Parameters:
    ///   - tracer: `InstrumentationSystem.tracer` (as bootstrapped) unless given.
    ///   - recordsServerMessages: `false` unless given: a span records an error by its kind and
    ///     status, as the library describes it, never with what the server wrote (a message in a
    ///     body) or an underlying error's text; `true` records the whole error (exporters publish
    ///     it as `exception.message`).
    public init(tracer: any Tracer = InstrumentationSystem.tracer, recordsServerMessages: Bool = false) {
        self.tracer = tracer
        self.recordsServerMessages = recordsServerMessages
    }

    // MARK: The observer

    public func observe(_ observation: APIEngine.Observation) {
        let task = observation.task
        let key = ObjectIdentifier(task)
        switch observation.kind {
        case .sent:
            // On the sender's thread: its task-local context is the parent.
            let span = tracer.startSpan(
                Self.taskSpanName, context: ServiceContext.current ?? .topLevel, ofKind: .internal)
            span.attributes[HTTPClientAttributes.taskIdentifier] = Int(truncatingIfNeeded: task.identifier)
            span.attributes[HTTPClientAttributes.policy] = task.concurrencyPolicy.rawValue
            if let scope = task.concurrencyScope { span.attributes[HTTPClientAttributes.scope] = scope }
            let ended = lock.withLock { () -> Result<APIResponseCache.Source, APIError>? in
                if let early = endedFirst.removeValue(forKey: key) { return early.result }
                tasks[key] = TaskSpans(span: span, identifier: task.identifier)
                return nil
            }
            if let ended { end(TaskSpans(span: span, identifier: task.identifier), with: ended) }
        case .attemptSent(_, _, let sharedWith?):
            // Joined an identical request: nothing of its own on the wire.
            let (span, joined) = lock.withLock { () -> ((any Span)?, (any Span)?) in
                let joined = tasks.values.first { $0.identifier == sharedWith }?.lastRequest
                return (tasks[key]?.span, joined)
            }
            guard let span else { return }
            span.attributes[HTTPClientAttributes.sharedWith] = Int(truncatingIfNeeded: sharedWith)
            if let joined { span.addLink(SpanLink(context: joined.context, attributes: [:])) }
        case .attemptSent(let attempt, let request, nil):
            // Redacted by the library's rule and the names this request treats as secrets (the
            // engine's `secretNames`, a custom credential header's).
            let span = lock.withLock { tasks[key]?.requests[attempt] }
            span?.attributes[HTTPClientAttributes.urlFull] =
                request.url.map { APISecrets.redacted($0, additionalNames: observation.secretNames) } ?? ""
        case .attemptEnded(let report):
            guard let span = lock.withLock({ tasks[key]?.requests.removeValue(forKey: report.attempt) })
            else { return }
            if let status = report.statusCode { span.attributes[HTTPClientAttributes.statusCode] = status }
            if let version = report.protocolVersion { span.attributes[HTTPClientAttributes.protocolVersion] = version }
            if let errorType = HTTPClientAttributes.errorType(of: report) {
                span.attributes[HTTPClientAttributes.errorType] = errorType
                if case .failure(let error) = report.result { record(error, on: span) }
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        case .retryScheduled(let delay, let error):
            let span = lock.withLock { tasks[key]?.span }
            span?.addEvent(
                SpanEvent(
                    name: "retry scheduled",
                    attributes: [
                        "apimanager.retry.delay": .double(delay),
                        HTTPClientAttributes.errorType: .string(HTTPClientAttributes.errorType(of: error)),
                    ]))
        case .renewingCredential(let attempt):
            let span = lock.withLock { tasks[key]?.span }
            span?.addEvent(
                SpanEvent(
                    name: "credential refused, renewing",
                    attributes: [HTTPClientAttributes.attempt: .int(Int64(attempt))]))
        case .ended(let result):
            let spans = lock.withLock { () -> TaskSpans? in
                guard let spans = tasks.removeValue(forKey: key) else {
                    // Its start is still to come: it ends then.
                    endedFirst[key] = (task, result)
                    return nil
                }
                return spans
            }
            if let spans { end(spans, with: result) }
        case .waitingForNetwork:
            let span = lock.withLock { tasks[key]?.span }
            span?.addEvent(SpanEvent(name: "waiting for the network"))
        case .waiting, .started, .responseBuilt, .cachedCopy:
            break
        }
    }

    /// Starts the client span of the request about to go on the wire and puts its context into
    /// the request, through the tracer's propagation (unchanged when the task's span is unknown).
    public func willSend(_ request: inout URLRequest, attempt: Int, of task: AnyAPITask) {
        let key = ObjectIdentifier(task)
        let (parent, resends) = lock.withLock { () -> ((any Span)?, Int) in
            guard let spans = tasks[key] else { return (nil, 0) }
            return (spans.span, spans.sent)
        }
        guard let parent else { return }
        let method = HTTPClientAttributes.method(of: request)
        let span = tracer.startSpan(method.spanName, context: parent.context, ofKind: .client)
        span.attributes[HTTPClientAttributes.method] = method.attribute
        if let original = method.original { span.attributes[HTTPClientAttributes.methodOriginal] = original }
        // `url.full` is set when the attempt is told sent, with the engine's own secret names too.
        let server = HTTPClientAttributes.server(of: request)
        span.attributes[HTTPClientAttributes.serverAddress] = server.address
        if let port = server.port { span.attributes[HTTPClientAttributes.serverPort] = port }
        if resends > 0 { span.attributes[HTTPClientAttributes.resendCount] = resends }
        span.attributes[HTTPClientAttributes.attempt] = attempt
        let (kept, replaced) = lock.withLock { () -> (Bool, (any Span)?) in
            guard tasks[key] != nil else { return (false, nil) }
            let replaced = tasks[key]?.requests.updateValue(span, forKey: attempt)
            tasks[key]?.lastRequest = span
            tasks[key]?.sent += 1
            return (true, replaced)
        }
        // An earlier request of this attempt that was never answered (sent again): ended now.
        replaced?.end()
        guard kept else {
            // The task ended meanwhile.
            span.end()
            return
        }
        tracer.inject(span.context, into: &request, using: URLRequestHeaderInjector())
    }

    // MARK: The adapter (1.0)

    /// Returns the request unchanged: the trace context is put into each request just before it
    /// goes on the wire (``willSend(_:attempt:of:)``), after the cache and request sharing
    /// decided. Kept so that engines configured with the tracer as an interceptor still build;
    /// giving it as an observer is enough.
    public func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
        request
    }

    // MARK: Helpers

    /// Ends a task's span, and the spans of its requests still on the wire (cancelled, timed out).
    private func end(_ spans: TaskSpans, with result: Result<APIResponseCache.Source, APIError>) {
        switch result {
        case .success(let source):
            spans.span.attributes[HTTPClientAttributes.responseSource] = source.rawValue
            for request in spans.requests.values { request.end() }
        case .failure(let error):
            let errorType = HTTPClientAttributes.errorType(of: error)
            for request in spans.requests.values {
                request.attributes[HTTPClientAttributes.errorType] = errorType
                request.setStatus(SpanStatus(code: .error))
                request.end()
            }
            spans.span.attributes[HTTPClientAttributes.errorType] = errorType
            record(error, on: spans.span)
            spans.span.setStatus(SpanStatus(code: .error))
        }
        spans.span.end()
    }

    /// Records `error` on `span`: as the library describes its kind, unless the user opted in to
    /// the whole error.
    private func record(_ error: APIError, on span: any Span) {
        if recordsServerMessages {
            span.recordError(error)
        } else {
            span.recordError(HTTPClientAttributes.OwnDescription(error))
        }
    }
}

/// Writes a propagated context into a request's headers.
struct URLRequestHeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}
