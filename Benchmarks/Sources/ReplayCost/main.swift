// What replaying a recorded session costs (APIEngine.HAR, MockTransport.replay, Benchmarks/README.md):
//
//   ReplayCost N    writes a HAR of N exchanges (100 endpoints, each answered N/100 times in turn, a
//                   JSON body of about 200 bytes), then, timed: reads it back, installs it on a
//                   MockTransport, and sends the N requests through an engine (inline, a TestClock,
//                   `.immediate` timing), each answered from the recording in order. Prints each part
//                   and the whole in seconds.
import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation

struct Item: APIRequest {
    var path: String
    var url: URL { URL(string: "https://api.test") ?? URL(fileURLWithPath: "/") }
    var parameters: APIParameters { .query(["page": 1]) }
}

final class ItemsAPI: APIManager {
    typealias Request = Item
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 10_000
let endpoints = 100
let body = String(repeating: "{\"id\":1,\"name\":\"tea\"},", count: 9)
let entries = (0..<count).map { index in
    APIEngine.HAR.Entry(
        startedDateTime: "2026-11-29T10:00:00.000Z", time: 12,
        request: APIEngine.HAR.Request(
            method: "GET", url: "https://api.test/items/\(index % endpoints)?page=1",
            queryString: [.init(name: "page", value: "1")]),
        response: APIEngine.HAR.Response(
            status: 200, headers: [.init(name: "Content-Type", value: "application/json")],
            content: APIEngine.HAR.Content(size: body.utf8.count + 2, mimeType: "application/json", text: "[\(body)]")),
        timings: APIEngine.HAR.Timings(wait: 10, receive: 2))
}
let file = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString).har")
try APIEngine.HAR(entries: entries).encoded().write(to: file)
defer { try? FileManager.default.removeItem(at: file) }

func seconds(since start: UInt64) -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }

let start = DispatchTime.now().uptimeNanoseconds
let har = try APIEngine.HAR.read(from: file)
let read = seconds(since: start)
let clock = TestClock()
let transport = MockTransport(clock: clock)
transport.replay(har, timing: .immediate)
let installed = seconds(since: start)
let api = ItemsAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
var answered = 0
for index in 0..<count {
    let task = api.send(Item(path: "/items/\(index % endpoints)"))
    if task.state == .finished { answered += 1 }
}
let total = seconds(since: start)
guard answered == count, transport.unusedStubs.isEmpty else {
    print("error: \(answered) of \(count) answered, \(transport.unusedStubs.count) unused")
    exit(1)
}
print(
    String(
        format: "replay of %d exchanges: read %.3f s, installed %.3f s, sent and answered %.3f s; whole %.3f s",
        count, read, installed - read, total - installed, total))
