// Three requests through an engine observed by the three integrations, against a simulated server
// on a virtual clock; the spans go to an in-process collector (swift-distributed-tracing's
// InMemoryTracer) printed at the end, one line per span, as an exporter to standard output would:
//
//   swift run --package-path Integrations/Observability ObservabilitySample
import APIManagerKit
import APIManagerKitObservability
import APIManagerKitTesting
import Foundation
import InMemoryTracing
import Logging
import Metrics
import MetricsTestKit
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Catalog: APIRequest {
    var route: String
    var url: URL { URL(string: "https://shop.example.com/api\(route)?api_key=secret-key") ?? URL(fileURLWithPath: "/") }
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 3, baseDelay: 1, jitter: .none) }
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
    var concurrencyScope: String? { "catalog" }
}

final class CatalogAPI: APIManager {
    typealias Request = Catalog
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

enum Sample {
    @TaskLocal static var request: String?
}

let clock = TestClock()
let server = MockTransport(clock: clock)
server.stub(nil, "/api/items", MockTransport.Reply.status(200).after(0.042))
server.stub(
    nil, "/api/prices", MockTransport.Reply.status(503).after(0.010), MockTransport.Reply.status(200).after(0.020))
server.stub(nil, "/api/slow", MockTransport.Reply.status(200).after(5))

let tracer = InMemoryTracer()
let metrics = TestMetrics()
let tracing = TracingInterceptor(tracer: tracer)
var logger = Logger(label: "shop.catalog") { label in StreamLogHandler.standardOutput(label: label) }
logger.logLevel = .info

var configuration = APIEngine.Configuration()
configuration.transport = server
configuration.clock = clock
configuration.delivery = .inline
configuration.execution = .inline
configuration.observers = [LoggingObserver(logger: logger), MetricsObserver(factory: metrics), tracing]
let catalog = CatalogAPI(engine: APIEngine(configuration: configuration))

// The caller's own span is the parent of the tasks' spans.
let parent = tracer.startSpan("load catalog page")
ServiceContext.$current.withValue(parent.context) {
    catalog.send(Catalog(route: "/items"))
    catalog.send(Catalog(route: "/prices"))
    let slow = catalog.send(Catalog(route: "/slow"))
    clock.advance(by: 1.1)
    slow.cancel()
}
parent.end()

print("\n# spans (in-process collector)")
for span in tracer.finishedSpans {
    var pairs: [String] = []
    // swift-format-ignore: ReplaceForEachWithForLoop
    span.attributes.forEach { key, value in pairs.append("\(key)=\(value)") }  // not a Sequence
    let attributes = pairs.sorted().joined(separator: " ")
    print(
        "\(span.operationName) kind=\(span.kind) trace=\(span.traceID) span=\(span.spanID) parent=\(span.parentSpanID ?? "-")"
            + " status=\(span.status.map { "\($0.code)" } ?? "unset") \(attributes)")
}
print("\n# propagated into the requests")
for record in server.records {
    let headers = (record.request.allHTTPHeaderFields ?? [:]).filter { $0.key.lowercased().hasPrefix("in-memory") }
    print("\(record.request.httpMethod ?? "GET") \(record.path): \(headers.sorted { $0.key < $1.key })")
}
print("\n# metrics")
for timer in metrics.timers {
    print("\(timer.label) \(timer.dimensions) \(timer.values.map { Double($0) / 1e9 }) s")
}
for counter in metrics.counters { print("\(counter.label) \(counter.dimensions) \(counter.totalValue)") }
