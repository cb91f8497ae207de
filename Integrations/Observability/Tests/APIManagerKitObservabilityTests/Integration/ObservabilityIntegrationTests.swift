// The three integrations on a real transport against the integration server (127.0.0.1): the
// context the tracer propagates reaches the server on every request, the spans, records and
// metrics carry the real request's facts, and a request cancelled on the wire ends its spans once.
// Shared with Transports/AsyncHTTPClient (its `ObservabilityShared` link), where it runs on
// AsyncHTTPClientTransport; skipped without the server (`bash Scripts/test.sh` starts it).
import APIManagerKit
import APIManagerKitObservability
import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

private let server = ProcessInfo.processInfo.environment["APIMANAGERKIT_TEST_SERVER"].flatMap(URL.init(string:))

/// A request to the integration server: `route` under its base URL, with a key in the query.
private struct ServerRequest: APIRequest {
    var route: String
    var url: URL {
        URL(string: (server?.absoluteString ?? "http://127.0.0.1:1") + route + "?api_key=s3cr3t")
            ?? URL(fileURLWithPath: "/")
    }
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 2, baseDelay: 0.05, jitter: .none) }
}

/// What httpbin's `/anything` says it received.
private struct Echo: APIResponse, Decodable {
    var headers: [String: String]
    init(from raw: APIRawResponse, for request: any APIRequest) throws {
        self = try JSONDecoder().decode(Echo.self, from: raw.body)
    }
}

private final class ServerAPI: APIManager {
    typealias Request = ServerRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// Keeps the engine's attempt reports.
private final class Reports: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: `all` is read and written only under `lock`.
    private let lock = NSLock()
    private var all: [APIEngine.AttemptReport] = []
    func observe(_ observation: APIEngine.Observation) {
        if case .attemptEnded(let report) = observation.kind { lock.withLock { all.append(report) } }
    }
    var list: [APIEngine.AttemptReport] { lock.withLock { all } }
}

/// A swift-log handler that keeps every record's message and metadata as text.
private struct TextLogHandler: LogHandler {
    final class Lines: @unchecked Sendable {
        // @unchecked: `all` is read and written only under `lock`.
        private let lock = NSLock()
        private var all: [String] = []
        func append(_ line: String) { lock.withLock { all.append(line) } }
        var list: [String] { lock.withLock { all } }
    }

    let lines: Lines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append("\(event.level) \(event.message) \(event.metadata ?? [:])")
    }
}

@Suite(
    "Observability against the integration server",
    .enabled(
        if: server != nil, "APIMANAGERKIT_TEST_SERVER is not set: SKIPPED (bash Scripts/test.sh starts the server)"),
    .timeLimit(.minutes(2)))
struct ObservabilityIntegrationTests {
    private let tracer = InMemoryTracer()
    private let metrics = TestMetrics()
    private let lines = TextLogHandler.Lines()
    private let reports = Reports()
    private let api: ServerAPI

    init() {
        let tracing = TracingInterceptor(tracer: tracer)
        let lines = self.lines
        let logger = Logger(label: "integration") { _ in TextLogHandler(lines: lines) }
        var configuration = APIEngine.Configuration()
        configuration.transport = ObservedTransport.make()
        configuration.delivery = .queue(DispatchQueue(label: "observability-integration"))
        configuration.observers = [
            LoggingObserver(logger: logger), MetricsObserver(factory: metrics), tracing, reports,
        ]
        api = ServerAPI(engine: APIEngine(configuration: configuration))
    }

    /// Waits (polling, real time) until every span has ended; `false` after 10 s.
    private func spansEnded(count: Int) async -> Bool {
        for _ in 0..<1000 {
            if tracer.finishedSpans.count >= count, tracer.activeSpans.isEmpty { return true }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return false
    }

    @Test func theServerReceivesTheRequestSpansContextAndTheSpanTheRequestsFacts() async throws {
        let echo = try await api.response(for: ServerRequest(route: "/anything"))
        #expect(await spansEnded(count: 2))
        let request = try #require(tracer.finishedSpans.first { $0.kind == .client })
        let headers = Dictionary(uniqueKeysWithValues: echo.headers.map { ($0.key.lowercased(), $0.value) })
        #expect(headers[InMemoryTracer.spanIDKey.lowercased()] == request.spanID)
        #expect(headers[InMemoryTracer.traceIDKey.lowercased()] == request.traceID)
        #expect(request.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(200))
        #expect(request.attributes["server.address"]?.toSpanAttribute() == .string("127.0.0.1"))
        #expect(request.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(server?.port ?? 0)))
        // `network.protocol.version`, when the transport tells it.
        #expect(
            request.attributes["network.protocol.version"]?.toSpanAttribute()
                == ObservedTransport.protocolVersion.map { .string($0) })
        let timer = try metrics.expectTimer(
            "http.client.request.duration",
            [
                ("http.request.method", "GET"), ("server.address", "127.0.0.1"),
                ("server.port", String(server?.port ?? 0)),
            ] + (ObservedTransport.protocolVersion.map { [("network.protocol.version", $0)] } ?? [])
                + [("http.response.status_code", "200")])
        #expect(timer.values.count == 1)
        #expect((timer.values.first ?? 0) > 0)
        #expect(
            lines.list.contains { $0.hasPrefix("info GET http://127.0.0.1:") && $0.contains("/anything?api_key=***") })
        #expect(!lines.list.joined().contains("s3cr3t"))
        // The transport told when the response's head arrived: the time to first byte.
        let report = try #require(reports.list.first)
        let firstByte = try #require(report.timeToFirstByte)
        #expect(firstByte >= 0)
        #expect(firstByte <= report.transportDuration)
    }

    @Test func aRetriedFailureGivesASpanPerRequestEachPropagated() async throws {
        await #expect(throws: APIError.self) { try await api.response(for: ServerRequest(route: "/status/503")) }
        #expect(await spansEnded(count: 3))
        let requests = tracer.finishedSpans.filter { $0.kind == .client }
        #expect(requests.map { $0.attributes["error.type"]?.toSpanAttribute() } == [.string("503"), .string("503")])
        #expect(tracer.performedContextInjections.count == 2)
        #expect(
            Set(tracer.performedContextInjections.compactMap { $0.values[InMemoryTracer.spanIDKey] })
                == Set(requests.map(\.spanID)))
        #expect(lines.list.filter { $0.hasPrefix("warning GET") }.count == 2)
    }

    @Test func aRequestCancelledOnTheWireEndsItsSpansOnce() async throws {
        let task = api.send(ServerRequest(route: "/delay/5"))
        for _ in 0..<500 where tracer.activeSpans.count < 2 { try? await Task.sleep(nanoseconds: 10_000_000) }
        #expect(tracer.activeSpans.count == 2)
        try? await Task.sleep(nanoseconds: 100_000_000)  // on the wire
        task.cancel()
        #expect(await spansEnded(count: 2))
        #expect(tracer.finishedSpans.count == 2)
        #expect(tracer.finishedSpans.allSatisfy { $0.status?.code == .error })
        let active = metrics.meters(label: "http.client.active_requests")
        #expect(active.allSatisfy { $0.lastValue == 0 })
    }
}
