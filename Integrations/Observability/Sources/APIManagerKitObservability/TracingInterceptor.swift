import APIManagerKit
import Foundation
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Traces what an engine does with swift-distributed-tracing: a span per task (`APIManagerKit
/// task`, a child of the sender's `ServiceContext.current`), and under it a client span per
/// request on the wire, named and attributed as OpenTelemetry's HTTP client conventions say
/// (named by its method; `http.request.method`, `url.full` with its secrets redacted,
/// `server.address`, `server.port`, `http.response.status_code`, `error.type`,
/// `http.request.resend_count`), whose context the tracer's propagation puts into the request
/// (with swift-otel, `traceparent` and `tracestate`): on every attempt, a retry and a request sent
/// again after a refreshed credential included. A failed attempt or task records its error and an
/// error status; every span is ended once, also when its task is cancelled while the request is on
/// the wire.
///
/// It is both an observer and an adapter: give it to the engine as both.
///
/// ```swift
/// let tracing = TracingInterceptor()   // InstrumentationSystem.tracer, as bootstrapped
/// var configuration = APIEngine.Configuration()
/// configuration.observers = [tracing]
/// configuration.interceptors = [tracing]   // last, so that it sees the request as sent
/// ```
public final class TracingInterceptor: APIEngine.Observer, APIRequestAdapter, @unchecked Sendable {
    // @unchecked: `tasks` is read and written only under `lock`; the tracer never changes.
    private let tracer: any Tracer
    private let lock = NSLock()
    private var tasks: [UInt64: TaskSpans] = [:]

    /// A task's span, and the spans of its requests on the wire, by attempt.
    private struct TaskSpans {
        let span: any Span
        var requests: [Int: any Span] = [:]
        /// How many requests went on the wire before (`http.request.resend_count`).
        var sent = 0
    }

    /// The name of a task's span.
    public static let taskSpanName = "APIManagerKit task"

    /// - Parameter tracer: `InstrumentationSystem.tracer` (as bootstrapped) unless given.
    public init(tracer: any Tracer = InstrumentationSystem.tracer) {
        self.tracer = tracer
    }

    // MARK: The observer

    public func observe(_ observation: APIEngine.Observation) {
        let task = observation.task
        switch observation.kind {
        case .sent:
            // On the sender's thread: its task-local context is the parent.
            let span = tracer.startSpan(
                Self.taskSpanName, context: ServiceContext.current ?? .topLevel, ofKind: .internal)
            span.attributes[HTTPClientAttributes.taskIdentifier] = Int(truncatingIfNeeded: task.identifier)
            span.attributes[HTTPClientAttributes.policy] = task.concurrencyPolicy.rawValue
            if let scope = task.concurrencyScope { span.attributes[HTTPClientAttributes.scope] = scope }
            lock.withLock { tasks[task.identifier] = TaskSpans(span: span) }
        case .attemptSent(let attempt, let request, let sharedWith):
            // Without the adapter (or for a joined request, which sends nothing) the span starts here.
            let span = requestSpan(for: task, attempt: attempt, request: request)
            if let sharedWith { span?.attributes["apimanager.shared_with"] = Int(truncatingIfNeeded: sharedWith) }
        case .attemptEnded(let report):
            guard let span = lock.withLock({ tasks[task.identifier]?.requests.removeValue(forKey: report.attempt) })
            else { return }
            if let status = report.statusCode { span.attributes[HTTPClientAttributes.statusCode] = status }
            if let errorType = HTTPClientAttributes.errorType(of: report) {
                span.attributes[HTTPClientAttributes.errorType] = errorType
                if case .failure(let error) = report.result { span.recordError(error) }
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        case .retryScheduled(let delay, let error):
            let span = lock.withLock { tasks[task.identifier]?.span }
            span?.addEvent(
                SpanEvent(
                    name: "retry scheduled",
                    attributes: [
                        "apimanager.retry.delay": .double(delay),
                        HTTPClientAttributes.errorType: .string(HTTPClientAttributes.errorType(of: error)),
                    ]))
        case .renewingCredential(let attempt):
            let span = lock.withLock { tasks[task.identifier]?.span }
            span?.addEvent(
                SpanEvent(
                    name: "credential refused, renewing",
                    attributes: [HTTPClientAttributes.attempt: .int(Int64(attempt))]))
        case .ended(let result):
            guard let spans = lock.withLock({ tasks.removeValue(forKey: task.identifier) }) else { return }
            let error: APIError?
            if case .failure(let failure) = result { error = failure } else { error = nil }
            // A request still on the wire when its task ended (cancelled, timed out): ended here, once.
            for request in spans.requests.values {
                if let error {
                    request.attributes[HTTPClientAttributes.errorType] = HTTPClientAttributes.errorType(of: error)
                    request.setStatus(SpanStatus(code: .error))
                }
                request.end()
            }
            if let error {
                spans.span.attributes[HTTPClientAttributes.errorType] = HTTPClientAttributes.errorType(of: error)
                spans.span.recordError(error)
                spans.span.setStatus(SpanStatus(code: .error))
            }
            spans.span.end()
        case .waitingForNetwork:
            let span = lock.withLock { tasks[task.identifier]?.span }
            span?.addEvent(SpanEvent(name: "waiting for the network"))
        case .waiting, .started, .responseBuilt, .cachedCopy:
            break
        }
    }

    // MARK: The adapter

    /// Starts the request's span and puts its context into the request, through the tracer's
    /// propagation (unchanged when the task's span is unknown: the observer was not given).
    public func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest {
        guard let span = requestSpan(for: attempt.task, attempt: attempt.number, request: request) else {
            return request
        }
        var request = request
        tracer.inject(span.context, into: &request, using: URLRequestHeaderInjector())
        return request
    }

    /// The span of the task's request on the wire for `attempt`, started (attributed from
    /// `request`) if none is; `nil` when the task's span is unknown.
    private func requestSpan(for task: AnyAPITask, attempt: Int, request: URLRequest) -> (any Span)? {
        let (existing, parent, resends) = lock.withLock { () -> ((any Span)?, (any Span)?, Int) in
            guard let spans = tasks[task.identifier] else { return (nil, nil, 0) }
            return (spans.requests[attempt], spans.span, spans.sent)
        }
        if let existing { return existing }
        guard let parent else { return nil }
        let method = HTTPClientAttributes.method(of: request)
        let span = tracer.startSpan(method, context: parent.context, ofKind: .client)
        span.attributes[HTTPClientAttributes.method] = method
        span.attributes[HTTPClientAttributes.urlFull] =
            request.url.map { APISecrets.redacted($0) } ?? ""
        let server = HTTPClientAttributes.server(of: request)
        span.attributes[HTTPClientAttributes.serverAddress] = server.address
        if let port = server.port { span.attributes[HTTPClientAttributes.serverPort] = port }
        if resends > 0 { span.attributes[HTTPClientAttributes.resendCount] = resends }
        span.attributes[HTTPClientAttributes.attempt] = attempt
        let kept = lock.withLock { () -> Bool in
            guard tasks[task.identifier] != nil, tasks[task.identifier]?.requests[attempt] == nil else { return false }
            tasks[task.identifier]?.requests[attempt] = span
            tasks[task.identifier]?.sent += 1
            return true
        }
        guard kept else {
            // The task ended meanwhile, or another thread started this request's span first.
            span.end()
            return lock.withLock { tasks[task.identifier]?.requests[attempt] }
        }
        return span
    }
}

/// Writes a propagated context into a request's headers.
struct URLRequestHeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}
