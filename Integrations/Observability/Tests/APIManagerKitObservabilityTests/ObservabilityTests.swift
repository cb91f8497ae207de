// The three integrations on an engine with a mock transport and a virtual clock: swift-log records
// with exact metadata and no secret, swift-metrics values, and spans from an in-memory tracer (the
// task's under the sender's span, a client span per request with the conventions' attributes, the
// context propagated into every request, every span ended once).
import APIManagerKit
import APIManagerKitTesting
import Foundation
import InMemoryTracing
import Logging
import Metrics
import MetricsTestKit
import Testing
import Tracing

@testable import APIManagerKitObservability

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Item: APIRequest {
    var route: String
    var query = "api_key=s3cr3t-query"
    var retries = 1
    var policy: APIConcurrencyPolicy = .default
    var method: HTTPMethod = .get
    var sharing: APIConcurrencyPolicy.Sharing = .never
    var cacheOption: APIResponseCache.Option = .networkOnly
    var cachesAuthenticatedResponses = false
    var url: URL { URL(string: "https://shop.example.com:8443\(route)?\(query)") ?? URL(fileURLWithPath: "/") }
    var headers: [String: String] { ["X-Api-Token": "s3cr3t-header"] }
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: retries, baseDelay: 1, jitter: .none) }
    var concurrencyPolicy: APIConcurrencyPolicy { policy }
    var concurrencyScope: String? { "catalog" }
}

final class Items: APIManager {
    typealias Request = Item
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// A swift-log handler that keeps every record.
struct RecordingLogHandler: LogHandler {
    struct Record {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    let records: Records
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    final class Records: @unchecked Sendable {
        // @unchecked: `all` is read and written only under `lock`.
        private let lock = NSLock()
        private var all: [Record] = []
        func append(_ record: Record) { lock.withLock { all.append(record) } }
        var list: [Record] { lock.withLock { all } }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        records.append(Record(level: event.level, message: "\(event.message)", metadata: event.metadata ?? [:]))
    }
}

/// An engine observed by the three integrations, on a mock transport and a virtual clock.
final class Observed: @unchecked Sendable {
    // @unchecked: immutable references to thread-safe objects.
    let clock = TestClock()
    let transport: MockTransport
    let tracer = InMemoryTracer()
    let metrics = TestMetrics()
    let records = RecordingLogHandler.Records()
    let items: Items
    let authenticator = MockAuthenticator(holdsRefreshes: true)

    init(
        logLevel: Logger.Level = .trace, authenticated: Bool = false, recordsServerMessages: Bool = false,
        cached: Bool = false, observersAhead: [any APIEngine.Observer] = [],
        observersBehind: [any APIEngine.Observer] = [],
        tracerFor: (TracingInterceptor) -> any APIEngine.Observer = { $0 }, execution: APIEngine.Execution = .inline,
        circuitBreaker: APIEngine.CircuitBreaker? = nil, retryBudget: APIEngine.RetryBudget? = nil
    ) {
        transport = MockTransport(clock: clock)
        let tracing = TracingInterceptor(tracer: tracer, recordsServerMessages: recordsServerMessages)
        var logger = Logger(label: "test") { [records] _ in RecordingLogHandler(records: records) }
        logger.logLevel = logLevel
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = execution
        configuration.observers =
            observersAhead + [LoggingObserver(logger: logger), MetricsObserver(factory: metrics), tracerFor(tracing)]
            + observersBehind
        configuration.circuitBreaker = circuitBreaker
        configuration.retryBudget = retryBudget
        if cached { configuration.cache = APIResponseCache(disk: nil, clock: clock) }
        if authenticated {
            let authentication = APIAuthentication(authenticator: authenticator, clock: clock)
            authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired-s3cr3t", refreshToken: "r"))
            configuration.authentication = authentication
        }
        items = Items(engine: APIEngine(configuration: configuration))
    }

    /// Every string a log record or a span holds.
    var everythingWritten: String {
        var text = records.list.map { "\($0.message) \($0.metadata)" }
        for span in tracer.finishedSpans {
            // swift-format-ignore: ReplaceForEachWithForLoop
            span.attributes.forEach { key, value in text.append("\(key)=\(value)") }  // not a Sequence
            text.append(span.operationName)
            text += span.errors.map { "\($0.error)" }
        }
        return text.joined(separator: "\n")
    }

    func spans(named name: String) -> [FinishedInMemorySpan] {
        tracer.finishedSpans.filter { $0.operationName == name }
    }
}

@Suite("Tracing")
struct TracingTests {
    @Test func aTaskSpanUnderTheSendersSpanAndAClientSpanPerRequestWithTheConventionsAttributes() throws {
        let o = Observed()
        o.transport.stub(nil, "/items", MockTransport.Reply.status(200).after(0.5))
        let parent = o.tracer.startSpan("page")
        ServiceContext.$current.withValue(parent.context) { _ = o.items.send(Item(route: "/items")) }
        o.clock.advance(by: 0.5)
        parent.end()
        let task = try #require(o.spans(named: TracingInterceptor.taskSpanName).first)
        let request = try #require(o.spans(named: "GET").first)
        let page = try #require(o.spans(named: "page").first)
        #expect(task.parentSpanID == page.spanID)
        #expect(task.traceID == page.traceID)
        #expect(task.kind == .internal)
        #expect(request.parentSpanID == task.spanID)
        #expect(request.kind == .client)
        #expect(request.attributes["http.request.method"]?.toSpanAttribute() == .string("GET"))
        #expect(
            request.attributes["url.full"]?.toSpanAttribute()
                == .string("https://shop.example.com:8443/items?api_key=***"))
        #expect(request.attributes["server.address"]?.toSpanAttribute() == .string("shop.example.com"))
        #expect(request.attributes["server.port"]?.toSpanAttribute() == .int64(8443))
        #expect(request.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(200))
        #expect(request.attributes["error.type"] == nil)
        #expect(request.status == nil)
        #expect(task.attributes["apimanager.policy"]?.toSpanAttribute() == .string("default"))
        #expect(task.attributes["apimanager.scope"]?.toSpanAttribute() == .string("catalog"))
        #expect(o.tracer.activeSpans.isEmpty)
    }

    @Test func theContextIsPropagatedIntoEveryRequestRetriesAndCredentialReplaysIncluded() throws {
        let o = Observed(authenticated: true)
        o.transport.stub(
            nil, "/items", MockTransport.Reply.status(503), MockTransport.Reply.status(401),
            MockTransport.Reply.status(200))
        _ = o.items.send(Item(route: "/items", retries: 3))
        o.clock.advance(by: 1)
        #expect(o.authenticator.release())
        #expect(o.transport.records.count == 3)
        let requests = o.spans(named: "GET")
        #expect(requests.count == 3)
        for (record, span) in zip(o.transport.records, requests) {
            #expect(record.request.value(forHTTPHeaderField: InMemoryTracer.spanIDKey) == span.spanID)
            #expect(record.request.value(forHTTPHeaderField: InMemoryTracer.traceIDKey) == span.traceID)
        }
        #expect(
            requests.map { $0.attributes["http.request.resend_count"]?.toSpanAttribute() } == [
                nil, .int64(1), .int64(2),
            ])
        #expect(
            requests.map { $0.attributes["error.type"]?.toSpanAttribute() } == [.string("503"), .string("401"), nil])
        #expect(requests.map { $0.status?.code } == [.error, .error, nil])
        let task = try #require(o.spans(named: TracingInterceptor.taskSpanName).first)
        #expect(task.events.map(\.name) == ["retry scheduled", "credential refused, renewing"])
        #expect(!o.everythingWritten.contains("s3cr3t"), "\(o.everythingWritten)")
    }

    @Test func everySpanEndsOnceWhenItsTaskIsCancelledWithItsRequestOnTheWire() throws {
        let o = Observed()
        o.transport.stub(nil, "/slow", MockTransport.Reply.status(200).held())
        let task = o.items.send(Item(route: "/slow"))
        #expect(o.tracer.activeSpans.count == 2)
        task.cancel()
        #expect(o.tracer.activeSpans.isEmpty)
        _ = o.transport.release()  // a late answer: nothing more
        #expect(o.tracer.finishedSpans.count == 2)
        let request = try #require(o.spans(named: "GET").first)
        #expect(request.attributes["error.type"]?.toSpanAttribute() == .string("cancelled"))
        let taskSpan = try #require(o.spans(named: TracingInterceptor.taskSpanName).first)
        #expect(taskSpan.status?.code == .error)
        #expect(taskSpan.errors.count == 1)
    }

    @Test func anIgnoredTaskHasASpanAndNoRequest() throws {
        let o = Observed()
        o.transport.stub(nil, "/refresh", MockTransport.Reply.status(200).held())
        _ = o.items.send(Item(route: "/refresh", policy: .ignoreCurrent))
        _ = o.items.send(Item(route: "/refresh", policy: .ignoreCurrent))
        let ignored = o.spans(named: TracingInterceptor.taskSpanName)
        #expect(ignored.count == 1)
        #expect(ignored.first?.attributes["error.type"]?.toSpanAttribute() == .string("ignored"))
        o.transport.releaseAll()
        #expect(o.spans(named: "GET").count == 1)
        #expect(o.tracer.activeSpans.isEmpty)
    }

    @Test func spansFromManyThreadsAllEndOnce() {
        let o = Observed()
        o.transport.stub(nil, "/items", .status(200))
        DispatchQueue.concurrentPerform(iterations: 40) { _ in _ = o.items.send(Item(route: "/items")) }
        #expect(o.spans(named: "GET").count == 40)
        #expect(o.spans(named: TracingInterceptor.taskSpanName).count == 40)
        #expect(o.tracer.activeSpans.isEmpty)
        #expect(Set(o.spans(named: "GET").compactMap(\.parentSpanID)).count == 40)
    }
}

/// Hands the tracer every observation of a task but its `sent`, which it hands over only after the
/// task's end: the tracer must not depend on the order it is told things in.
final class EndFirst: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: `held` is read and written only under `lock`; `tracer` never changes.
    let tracer: TracingInterceptor
    private let lock = NSLock()
    private var held: [ObjectIdentifier: APIEngine.Observation] = [:]
    init(_ tracer: TracingInterceptor) { self.tracer = tracer }

    func observe(_ observation: APIEngine.Observation) {
        switch observation.kind {
        case .sent:
            lock.withLock { held[ObjectIdentifier(observation.task)] = observation }
        case .ended:
            tracer.observe(observation)
            if let sent = lock.withLock({ held.removeValue(forKey: ObjectIdentifier(observation.task)) }) {
                tracer.observe(sent)
            }
        default:
            tracer.observe(observation)
        }
    }

    func willSend(_ request: inout URLRequest, attempt: Int, of task: AnyAPITask) {
        tracer.willSend(&request, attempt: attempt, of: task)
    }
}

/// An observer that takes its time over `sent`.
struct SlowAtSent: APIEngine.Observer {
    func observe(_ observation: APIEngine.Observation) {
        guard case .sent = observation.kind else { return }
        for _ in 0..<300 { sched_yield() }
    }
}

/// Leaves `group` once per task that ended.
struct EndCounter: APIEngine.Observer {
    let group: DispatchGroup
    func observe(_ observation: APIEngine.Observation) {
        if case .ended = observation.kind { group.leave() }
    }
}

@Suite("Tracing: corrections", .timeLimit(.minutes(1)))
struct TracingCorrectionTests {
    @Test func anEndToldBeforeTheStartStillEndsTheSpan() {
        let o = Observed(tracerFor: { EndFirst($0) })
        o.transport.stub(nil, "/refresh", MockTransport.Reply.status(200).held())
        let first = o.items.send(Item(route: "/refresh", policy: .ignoreCurrent))
        _ = o.items.send(Item(route: "/refresh", policy: .ignoreCurrent))
        first.cancel()
        #expect(o.spans(named: TracingInterceptor.taskSpanName).count == 2)
        #expect(o.tracer.activeSpans.isEmpty)
    }

    /// A line of tasks sent from two threads on a concurrent engine, a slow observer ahead of the
    /// tracer: every request carries its span's context, and no span stays open.
    @Test func withASlowObserverAheadEveryRequestCarriesItsContextAndEverySpanEnds() {
        let ended = DispatchGroup()
        let o = Observed(
            observersAhead: [SlowAtSent()], observersBehind: [EndCounter(group: ended)],
            execution: .concurrent(label: "tracing.line"))
        o.transport.stub(nil, "/cart", .status(200))
        for _ in 0..<100 { ended.enter() }
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            for _ in 0..<50 { _ = o.items.send(Item(route: "/cart", policy: .waitUntilDone)) }
        }
        ended.wait()
        #expect(o.transport.records.count == 100)
        let spanIDs = Set(o.spans(named: "GET").map(\.spanID))
        for record in o.transport.records {
            let id = record.request.value(forHTTPHeaderField: InMemoryTracer.spanIDKey)
            #expect(id.map(spanIDs.contains) == true)
        }
        #expect(o.spans(named: TracingInterceptor.taskSpanName).count == 100)
        #expect(o.tracer.activeSpans.isEmpty)
    }

    @Test(arguments: [false, true])
    func whatTheServerWroteStaysOffTheSpansUnlessAskedFor(recordsServerMessages: Bool) throws {
        let o = Observed(recordsServerMessages: recordsServerMessages)
        o.transport.stub(nil, "/login", .json(#"{"message":"bad password for ada"}"#, status: 401))
        _ = o.items.send(Item(route: "/login"))
        let task = try #require(o.spans(named: TracingInterceptor.taskSpanName).first)
        let request = try #require(o.spans(named: "GET").first)
        let written = (task.errors + request.errors).map { "\($0.error)" }.joined(separator: "\n")
        #expect(task.attributes["error.type"]?.toSpanAttribute() == .string("401"))
        #expect(request.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(401))
        #expect(written.contains("401"), "\(written)")
        #expect(written.contains("bad password") == recordsServerMessages, "\(written)")
    }

    /// The conventions' rule for methods, with the cases of dd-trace-java's `OtelHttpSemanticsTest`:
    /// method names are case-sensitive; a known one is kept, any other is `_OTHER` with the
    /// original, and names its span `HTTP`.
    @Test(
        arguments: [
            ("GET", "GET", "GET", nil), ("POST", "POST", "POST", nil), ("DELETE", "DELETE", "DELETE", nil),
            ("PATCH", "PATCH", "PATCH", nil), ("QUERY", "QUERY", "QUERY", nil), ("CONNECT", "CONNECT", "CONNECT", nil),
            ("PROPFIND", "HTTP", "_OTHER", "PROPFIND"), ("get", "HTTP", "_OTHER", "get"),
            ("Get", "HTTP", "_OTHER", "Get"), ("BOGUS", "HTTP", "_OTHER", "BOGUS"),
        ] as [(String, String, String, String?)])
    func aMethodTheConventionsDoNotKnowIsOtherWithItsOriginal(
        sent: String, spanName: String, attribute: String, original: String?
    ) {
        let method = HTTPClientAttributes.method(sent)
        #expect(method.spanName == spanName)
        #expect(method.attribute == attribute)
        #expect(method.original == original)
    }

    /// On the wire (`HTTPMethod` writes a method upper-cased, so `get` goes as `GET`).
    @Test(
        arguments: [
            ("PROPFIND", "HTTP", "_OTHER", "PROPFIND"), ("BOGUS", "HTTP", "_OTHER", "BOGUS"),
            ("PUT", "PUT", "PUT", nil),
        ] as [(String, String, String, String?)])
    func aRequestsSpanIsNamedAndAttributedByItsMethod(
        sent: String, spanName: String, attribute: String, original: String?
    ) throws {
        let o = Observed()
        o.transport.stub(nil, "/items", .status(200))
        _ = o.items.send(Item(route: "/items", method: HTTPMethod(rawValue: sent)))
        #expect(o.transport.records.first?.request.httpMethod == sent)
        let span = try #require(o.tracer.finishedSpans.first { $0.kind == .client })
        #expect(span.operationName == spanName)
        #expect(span.attributes["http.request.method"]?.toSpanAttribute() == .string(attribute))
        #expect(span.attributes["http.request.method_original"]?.toSpanAttribute() == original.map { .string($0) })
    }

    @Test func anAnswerFromTheCacheHasNoClientSpanAndItsTaskSaysSo() throws {
        let o = Observed(cached: true)
        o.transport.stub(nil, "/items", .status(200, headers: ["Cache-Control": "max-age=600"]))
        let item = Item(route: "/items", cacheOption: .fresh(maxAge: 600), cachesAuthenticatedResponses: true)
        _ = o.items.send(item)
        _ = o.items.send(item)
        #expect(o.transport.records.count == 1)
        #expect(o.tracer.finishedSpans.filter { $0.kind == .client }.count == 1)
        let tasks = o.spans(named: TracingInterceptor.taskSpanName)
        #expect(
            tasks.map { $0.attributes["apimanager.response.source"]?.toSpanAttribute() } == [
                .string("network"), .string("cache"),
            ])
        #expect(o.tracer.activeSpans.isEmpty)
    }

    @Test func identicalRequestsStillShareOneRequestOnTheWireLinkedToEachTask() throws {
        let o = Observed()
        o.transport.stub(nil, "/items", MockTransport.Reply.status(200).held())
        let leader = o.items.send(Item(route: "/items", sharing: .safeMethods))
        let member = o.items.send(Item(route: "/items", sharing: .safeMethods))
        o.transport.releaseAll()
        #expect(o.transport.records.count == 1)
        let clients = o.tracer.finishedSpans.filter { $0.kind == .client }
        #expect(clients.count == 1)
        let client = try #require(clients.first)
        #expect(o.transport.records.first?.request.value(forHTTPHeaderField: InMemoryTracer.spanIDKey) == client.spanID)
        let tasks = o.spans(named: TracingInterceptor.taskSpanName)
        let memberSpan = try #require(
            tasks.first { $0.attributes["apimanager.task.id"]?.toSpanAttribute() == .int64(Int64(member.identifier)) })
        #expect(memberSpan.links.map { $0.context.inMemorySpanContext?.spanID } == [client.spanID])
        #expect(
            memberSpan.attributes["apimanager.shared_with"]?.toSpanAttribute() == .int64(Int64(leader.identifier)))
        #expect(o.tracer.activeSpans.isEmpty)
    }

    /// Engines number their tasks each from 1: one tracer and one metrics observer serving two
    /// engines keep their tasks apart.
    @Test func oneObserverServesSeveralEnginesWithoutMixingTheirTasks() throws {
        let tracer = InMemoryTracer()
        let metrics = TestMetrics()
        let tracing = TracingInterceptor(tracer: tracer)
        let counting = MetricsObserver(factory: metrics)
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/slow", MockTransport.Reply.status(200).held())
        transport.stub(nil, "/fast", .status(200))
        func engine() -> Items {
            var configuration = APIEngine.Configuration()
            configuration.transport = transport
            configuration.delivery = .inline
            configuration.execution = .inline
            configuration.observers = [counting, tracing]
            return Items(engine: APIEngine(configuration: configuration))
        }
        let (first, second) = (engine(), engine())
        let slow = first.send(Item(route: "/slow"))
        let fast = second.send(Item(route: "/fast"))
        #expect(slow.identifier == fast.identifier, "each engine numbers from 1")
        #expect(tracer.activeSpans.count == 2, "the slow task and its request, still on the wire")
        let active = try metrics.expectMeter(
            "http.client.active_requests",
            [("http.request.method", "GET"), ("server.address", "shop.example.com"), ("server.port", "8443")])
        #expect(active.lastValue == 1)
        transport.releaseAll()
        #expect(tracer.activeSpans.isEmpty)
        #expect(tracer.finishedSpans.count == 4)
        #expect(active.lastValue == 0)
    }

    @Test func noSpanStaysOpenWhenTheManagerIsReleasedWithTasksInFlight() {
        let tracer = InMemoryTracer()
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/slow", MockTransport.Reply.status(200).held())
        do {
            var configuration = APIEngine.Configuration()
            configuration.transport = transport
            configuration.delivery = .inline
            configuration.execution = .inline
            configuration.observers = [TracingInterceptor(tracer: tracer)]
            let items = Items(engine: APIEngine(configuration: configuration))
            _ = items.send(Item(route: "/slow", policy: .waitUntilDone))
            _ = items.send(Item(route: "/slow", policy: .waitUntilDone))
            #expect(tracer.activeSpans.count == 3, "two tasks and the first one's request")
        }
        #expect(tracer.activeSpans.isEmpty)
        #expect(tracer.finishedSpans.count == 3)
    }

    @Test(arguments: ["1.1", "2", nil] as [String?])
    func theHTTPVersionATransportTellsIsOnTheSpanTheDurationAndTheRecord(version: String?) throws {
        let o = Observed()
        o.transport.protocolVersion = version
        o.transport.stub(nil, "/items", .status(200))
        _ = o.items.send(Item(route: "/items"))
        let span = try #require(o.tracer.finishedSpans.first { $0.kind == .client })
        #expect(span.attributes["network.protocol.version"]?.toSpanAttribute() == version.map { .string($0) })
        let timer = try o.metrics.expectTimer(
            "http.client.request.duration",
            [
                ("http.request.method", "GET"), ("server.address", "shop.example.com"), ("server.port", "8443"),
            ] + (version.map { [("network.protocol.version", $0)] } ?? []) + [("http.response.status_code", "200")])
        #expect(timer.values.count == 1)
        let record = try #require(o.records.list.first { $0.level == .info })
        #expect(record.metadata["network.protocol.version"].map { "\($0)" } == version)
    }

    /// OpenTelemetry's `url.full`: the query values of `AWSAccessKeyId`, `Signature`, `sig` and
    /// `X-Goog-Signature` are redacted (the conventions' list).
    @Test(arguments: ["AWSAccessKeyId", "Signature", "sig", "X-Goog-Signature"])
    func theConventionsQueryKeysAreRedactedInTheURL(key: String) throws {
        let o = Observed()
        o.transport.stub(nil, "/items", .status(200))
        _ = o.items.send(Item(route: "/items", query: "\(key)=AKIAs3cr3t&page=2"))
        let span = try #require(o.tracer.finishedSpans.first { $0.kind == .client })
        #expect(
            span.attributes["url.full"]?.toSpanAttribute()
                == .string("https://shop.example.com:8443/items?\(key)=***&page=2"))
    }

    /// The circuit breaker's and the retry budget's notices are records: an opened circuit and a
    /// refused retry at `.warning` (the error by its kind, nothing a server wrote), a closed circuit
    /// at the attempts' level.
    @Test func circuitAndBudgetNoticesAreLogged() throws {
        let o = Observed(
            logLevel: .info, circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 2, openInterval: 5),
            retryBudget: APIEngine.RetryBudget(ratio: 0, minimumRetries: 0, window: 60))
        let up = UpFlag()
        o.transport.stub(nil, "/items") { _ in
            up.value ? .status(200) : .status(503, body: Data("s3cr3t-server-text".utf8))
        }
        _ = o.items.send(Item(route: "/items", retries: 2))
        _ = o.items.send(Item(route: "/items"))
        up.value = true
        o.clock.advance(by: 5)
        _ = o.items.send(Item(route: "/items"))
        let records = o.records
        let notices = records.list.filter { $0.metadata["apimanager.notice"] != nil }
        #expect(
            notices.map { "\($0.metadata["apimanager.notice"] ?? "")" } == [
                "retryRefused", "circuitOpened", "circuitClosed",
            ])
        #expect(notices.map(\.level) == [.warning, .warning, .info])
        #expect(notices.first?.message.description == "retryRefused: 503")
        #expect(notices[1].metadata["apimanager.origin"].map { "\($0)" } == "https://shop.example.com:8443")
        #expect(notices[1].metadata["apimanager.attempt"].map { "\($0)" } == "1")
        #expect(!records.list.map { "\($0.message) \($0.metadata)" }.joined().contains("s3cr3t"))
    }

    /// The engine's own secret names (`APIEngine.secretNames`) are redacted in `url.full` too, not
    /// only the library's rule.
    @Test func theEnginesSecretNamesAreRedactedInTheURL() throws {
        let o = Observed()
        o.items.engine.secretNames = ["otp"]
        o.transport.stub(nil, "/items", .status(200))
        _ = o.items.send(Item(route: "/items", query: "otp=462913&page=2"))
        let span = try #require(o.tracer.finishedSpans.first { $0.kind == .client })
        #expect(
            span.attributes["url.full"]?.toSpanAttribute()
                == .string("https://shop.example.com:8443/items?otp=***&page=2"))
        #expect(!o.everythingWritten.contains("462913"), "\(o.everythingWritten)")
    }
}

@Suite("Metrics")
struct MetricsTests {
    @Test func theRequestDurationsActiveRequestsLineTimesRetriesAndEndsAreRecorded() throws {
        let o = Observed()
        o.transport.stub(
            nil, "/items", MockTransport.Reply.status(503).after(0.25), MockTransport.Reply.status(200).after(0.5))
        o.transport.stub(nil, "/next", MockTransport.Reply.status(200).after(0.5))
        _ = o.items.send(Item(route: "/items", retries: 2, policy: .waitUntilDone))
        _ = o.items.send(Item(route: "/next", policy: .waitUntilDone))
        let server = [("http.request.method", "GET"), ("server.address", "shop.example.com"), ("server.port", "8443")]
        #expect(try o.metrics.expectMeter("http.client.active_requests", server).lastValue == 1)
        o.clock.advance(by: 0.25)
        o.clock.advance(by: 1)
        o.clock.advance(by: 0.5)
        o.clock.advance(by: 0.5)
        let ok = try o.metrics.expectTimer(
            "http.client.request.duration", server + [("http.response.status_code", "200")])
        #expect(ok.values == [500_000_000, 500_000_000])
        let failed = try o.metrics.expectTimer(
            "http.client.request.duration", server + [("http.response.status_code", "503"), ("error.type", "503")])
        #expect(failed.values == [250_000_000])
        #expect(try o.metrics.expectMeter("http.client.active_requests", server).lastValue == 0)
        let line = try o.metrics.expectTimer("apimanager.task.line.duration", [("apimanager.policy", "waitUntilDone")])
        #expect(line.values == [0, 1_750_000_000], "the second waited for the first's two attempts and its retry")
        #expect(
            try o.metrics.expectCounter("apimanager.task.retries", [("apimanager.policy", "waitUntilDone")]).totalValue
                == 1)
        #expect(
            o.metrics.counterTotal(
                label: "apimanager.tasks",
                dimensions: [("apimanager.policy", "waitUntilDone"), ("apimanager.outcome", "finished")]) == 2)
    }

    @Test func aCancelledRequestLeavesTheActiveRequestsAndCredentialRenewalsAreCounted() throws {
        let o = Observed(authenticated: true)
        o.transport.stub(nil, "/slow", MockTransport.Reply.status(200).held())
        o.transport.stub(nil, "/me", .status(401), .status(200))
        let slow = o.items.send(Item(route: "/slow"))
        slow.cancel()
        let server = [("http.request.method", "GET"), ("server.address", "shop.example.com"), ("server.port", "8443")]
        #expect(try o.metrics.expectMeter("http.client.active_requests", server).lastValue == 0)
        _ = o.items.send(Item(route: "/me"))
        #expect(o.authenticator.release())
        #expect(try o.metrics.expectCounter("apimanager.credential.renewals").totalValue == 1)
        #expect(try o.metrics.expectMeter("http.client.active_requests", server).lastValue == 0)
        #expect(
            o.metrics.counterTotal(
                label: "apimanager.tasks",
                dimensions: [("apimanager.policy", "default"), ("apimanager.outcome", "cancelled")]) == 1)
    }
}

@Suite("Logging")
struct LoggingTests {
    @Test func oneRecordPerAttemptWithTheConventionsMetadataAndFailuresAtWarning() throws {
        let o = Observed(logLevel: .info)
        o.transport.stub(nil, "/items", MockTransport.Reply.status(503), MockTransport.Reply.status(200).after(0.5))
        _ = o.items.send(Item(route: "/items", retries: 2, policy: .waitUntilDone))
        o.clock.advance(by: 1)
        o.clock.advance(by: 0.5)
        let records = o.records.list
        #expect(records.map(\.level) == [.warning, .info])
        let ok = records[1]
        #expect(ok.message == "GET https://shop.example.com:8443/items?api_key=*** → 200")
        #expect(ok.metadata["http.request.method"] == "GET")
        #expect(ok.metadata["url.full"] == "https://shop.example.com:8443/items?api_key=***")
        #expect(ok.metadata["server.address"] == "shop.example.com")
        #expect(ok.metadata["http.response.status_code"] == "200")
        #expect(ok.metadata["apimanager.attempt"] == "2")
        #expect(ok.metadata["http.client.request.duration"] == "0.5")
        #expect(ok.metadata["apimanager.policy"] == "waitUntilDone")
        #expect(ok.metadata["apimanager.scope"] == "catalog")
        #expect(ok.metadata["error.type"] == nil)
        #expect(records[0].metadata["error.type"] == "503")
    }

    @Test func noSecretInAnyRecordAtAnyLevel() {
        let o = Observed(logLevel: .trace, authenticated: true)
        o.transport.stub(nil, "/me", .json(#"{"message":"token s3cr3t-echo refused"}"#, status: 401), .status(403))
        _ = o.items.send(Item(route: "/me", query: "token=s3cr3t-query&password=s3cr3t-password"))
        _ = o.authenticator.release()
        let written = o.everythingWritten
        #expect(!written.contains("s3cr3t"), "\(written)")
        #expect(o.records.list.contains { $0.level == .warning && $0.metadata["error.type"] == "403" })
        #expect(o.records.list.contains { $0.level == .debug && $0.message == "task sent" })
    }
}

/// A flag a stub reads while the test sets it.
private final class UpFlag: @unchecked Sendable {
    // @unchecked: `up` behind `lock`.
    private let lock = NSLock()
    private var up = false
    var value: Bool {
        get { lock.withLock { up } }
        set { lock.withLock { up = newValue } }
    }
}
