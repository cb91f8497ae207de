// What observing costs per task (inline engine, a transport answering inside `send`):
//
//   ObservabilityCost MODE N     sends N tasks; MODE is
//     none        no observer
//     null        an observer that does nothing (what the engine pays to tell one)
//     core        APIEngine.LogObserver at .info, writing nowhere
//     noop        the three integrations on no-op backends: a swift-log handler that drops its
//                 records (level .info), swift-metrics' no-op factory, swift-distributed-tracing's
//                 NoOpTracer
//     inmemory    the three on in-memory backends: a handler keeping nothing but at .debug,
//                 MetricsTestKit's TestMetrics, InMemoryTracer (which keeps every span)
//
// Count instructions with callgrind at two N and take the slope (Benchmarks/README.md, "Observing"):
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/ObservabilityCost noop 1000
import APIManagerKit
import APIManagerKitObservability
import Foundation
import InMemoryTracing
import Logging
import Metrics
import MetricsTestKit
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Ping: APIRequest {
    var url: URL { URL(string: "http://127.0.0.1:8080/ping?api_key=k") ?? URL(fileURLWithPath: "/") }
}

final class PingAPI: APIManager {
    typealias Request = Ping
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

struct NoopCancellable: APICancellable { func cancel() {} }

struct InstantTransport: APITransport {
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        completion(.success(APIRawResponse(statusCode: 200)))
        return NoopCancellable()
    }
}

/// Told everything, does nothing.
struct NullObserver: APIEngine.Observer {
    func observe(_ observation: APIEngine.Observation) {}
}

/// Drops every record (after swift-log checked its level).
struct DroppingLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {}
}

let arguments = CommandLine.arguments.dropFirst()
let mode = arguments.first ?? "none"
let count = arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000

var configuration = APIEngine.Configuration()
configuration.transport = InstantTransport()
configuration.delivery = .inline
configuration.execution = .inline
configuration.defaultHeaders = .none
switch mode {
case "none":
    break
case "null":
    configuration.observers = [NullObserver()]
case "core":
    configuration.observers = [APIEngine.LogObserver(minimumLevel: .info) { _, _ in }]
case "noop", "inmemory":
    let inMemory = mode == "inmemory"
    let level: Logger.Level = inMemory ? .debug : .info
    let logger = Logger(label: "cost") { _ in DroppingLogHandler(logLevel: level) }
    let tracing = TracingInterceptor(tracer: inMemory ? InMemoryTracer() : NoOpTracer())
    let metrics = MetricsObserver(factory: inMemory ? TestMetrics() : NOOPMetricsHandler.instance)
    configuration.observers = [LoggingObserver(logger: logger), metrics, tracing]
default:
    FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
    exit(2)
}
let api = PingAPI(engine: APIEngine(configuration: configuration))
let start = Date()
for _ in 0..<count { api.send(Ping()) }
let seconds = Date().timeIntervalSince(start)
print(String(format: "%@: %d tasks, %.2f µs per task", mode, count, seconds / Double(count) * 1e6))
