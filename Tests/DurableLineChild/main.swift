// A process the durable-line integration test starts and kills (DurableLineIntegrationTests): it
// opens a durable store, replays its line, sends the edits it is given, and waits until the line is
// empty, or kills itself (SIGKILL, nothing flushed, nothing cleaned up) at the step it is told.
//
//   DurableLineChild BASE_URL STORE_DIR GROUP EDITS KILL
//     EDITS  names to send after the replay, comma-separated ("" for none)
//     KILL   none, or STEP:NAME with STEP one of
//              before-write  while the edit's request is being encoded for its record
//              after-write   when the edit reaches the transport (its record written, nothing sent)
//              after-answer  when the server's answer arrives, before the engine sees it
//            (the test kills it mid-send itself, while the server holds the edit: `hold` below)
//     HOLD   (environment DURABLE_CHILD_HOLD=NAME) the server holds NAME's answer 3 s
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let arguments = CommandLine.arguments
guard arguments.count == 6, let base = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: DurableLineChild BASE_URL STORE_DIR GROUP EDITS KILL\n".utf8))
    exit(64)
}
let store = URL(fileURLWithPath: arguments[2])
let group = arguments[3]
let edits = arguments[4].split(separator: ",").map(String.init)
let held = ProcessInfo.processInfo.environment["DURABLE_CHILD_HOLD"] ?? ""

/// Where the process kills itself: the fifth argument, `STEP:NAME`.
enum Kill {
    static let point = CommandLine.arguments.count == 6 ? CommandLine.arguments[5] : "none"

    @Sendable static func die(at step: String, for name: String) {
        if point == "\(step):\(name)" { raise(SIGKILL) }
    }
}

struct Mutation: APIRequest, Codable {
    let name: String
    let group: String
    let base: URL
    let hold: Double

    var url: URL { base }
    var path: String { "fixture/mutation/\(group)" }
    var method: HTTPMethod { .post }
    var parameters: APIParameters { APIParameters(["name": .string(name), "hold": .double(hold)]) }
    var bodyEncoding: APIParameters.BodyEncoding { .form }
    var concurrencyPolicy: APIConcurrencyPolicy { .durable }
    var concurrencyScope: String? { "mutations" }
    var idempotencyKey: APIIdempotencyKey? { .standard }
    var timeout: TimeInterval { 30 }

    func encode(to encoder: any Encoder) throws {
        Kill.die(at: "before-write", for: name)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(group, forKey: .group)
        try container.encode(base, forKey: .base)
        try container.encode(hold, forKey: .hold)
    }
}

final class Mutations: APIManager {
    typealias Request = Mutation
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// Holds every request back until the run has written all its edits, so that what was written does
/// not depend on how fast the server answers the first.
enum Gate {
    static let opened = DispatchSemaphore(value: 0)

    static func open() {
        for _ in 0..<64 { opened.signal() }
    }

    static func pass() {
        opened.wait()
        opened.signal()
    }
}

/// The real transport, with the kill points of `after-write` and `after-answer`.
struct KillingTransport: APITransport {
    let inner = ChildTransport.make()

    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let name = Self.name(of: request)
        Gate.pass()
        Kill.die(at: "after-write", for: name)
        return inner.send(request, options: options) { result in
            Kill.die(at: "after-answer", for: name)
            completion(result)
        }
    }

    /// The edit's name: in the query of a POST's URL, or its form body.
    static func name(of request: APIHTTPRequest) -> String {
        guard case .data(let body) = request.body,
            let form = String(data: body, encoding: .utf8),
            let pair = form.split(separator: "&").first(where: { $0.hasPrefix("name=") })
        else { return "" }
        return String(pair.dropFirst("name=".count))
    }
}

var configuration = APIEngine.Configuration()
configuration.transport = KillingTransport()
configuration.delivery = .inline
configuration.execution = .concurrent()
configuration.durableStore = APIEngine.DurableStore(directory: store)
let mutations = Mutations(engine: APIEngine(configuration: configuration))
do {
    let replay = try mutations.replayDurableTasks(inScope: "mutations")
    print("replayed \(replay.count) set aside \(replay.setAside.count)")
} catch {
    print("replay failed: \(error)")
    exit(1)
}
for name in edits {
    mutations.send(Mutation(name: name, group: group, base: base, hold: name == held ? 3 : 0))
}
Gate.open()
let deadline = Date().addingTimeInterval(60)
while mutations.engine.inFlightCount > 0, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
print("done, \(mutations.engine.inFlightCount) in flight")
exit(mutations.engine.inFlightCount == 0 ? 0 : 2)
