// How much memory finished tasks keep: resident memory before and after sending N instant tasks,
// with and without a deadline, on the real DispatchClock. Run with:
//   swift run -c release --package-path Benchmarks TaskMemory [N]
// The engine keeps nothing per request once a task ends, so every row should stay flat (a few
// hundred KiB of allocator noise), whatever the deadline.
import APIManagerKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct InstantTransport: APITransport {
    func send(
        _ request: APIHTTPRequest, options: APITransportOptions,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        completion(.success(APIRawResponse(statusCode: 200, body: Data("{}".utf8))))
        return Nothing()
    }
    struct Nothing: APICancellable { func cancel() {} }
}

struct Ping: APIRequest {
    let url = URL(fileURLWithPath: "/")
    var deadline: TimeInterval?
}

final class Client: APIManager {
    typealias Request = Ping
    typealias Response = APIRawResponse
    let engine: APIEngine
    init() { engine = APIEngine(transport: InstantTransport(), delivery: .inline) }
}

func residentKiB() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
        let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
    else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 200_000
print("finished tasks kept in memory, \(count) instant tasks each (resident memory growth)")
for (label, deadline, managers) in [
    ("no deadline", nil, 1), ("60 s deadline", 60.0, 1), ("30 s deadline, a manager per 8 tasks", 30.0, count / 8),
] as [(String, TimeInterval?, Int)] {
    let before = residentKiB()
    weak var last: AnyAPITask?
    var client = Client()
    for index in 0..<count {
        if managers > 1, index % (count / managers) == 0 { client = Client() }
        last = client.send(Ping(deadline: deadline))
    }
    let after = residentKiB()
    print("  \(label): +\(after - before) KiB; last task \(last == nil ? "released" : "STILL ALIVE")")
}
