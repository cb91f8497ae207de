import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The core issue's policies over real sockets: the server records when each request ran.
@Suite(
    "Integration: policies over real sockets", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct PolicyIntegrationTests {
    struct Entry: Decodable {
        let name: String
        let start: Double
        let end: Double
    }
    struct Log: APIResponse, Decodable { let entries: [Entry] }

    /// A request the server holds for `delay` seconds, or, with `together`, until that many requests of
    /// the group have reached it (at most `delay` seconds).
    func tracked(
        _ group: String, _ name: String, _ policy: APIConcurrencyPolicy, delay: Double = 0.2, together: Int? = nil
    ) -> HTTPRequest {
        var parameters: [String: APIValue] = ["name": .string(name), "delay": .double(delay)]
        if let together { parameters["together"] = .int(together) }
        var request = HTTPRequest("fixture/track/\(group)", parameters: APIParameters(parameters))
        request.concurrencyPolicy = policy
        return request
    }

    /// A client whose delegate tells when its tasks end (the caller keeps the delegate alive).
    func clientWithEnds<Response: APIResponse>(_ type: Response.Type) -> (Client<Response>, TaskEnds) {
        let client = Client<Response>()
        let ends = TaskEnds()
        client.delegate = ends
        return (client, ends)
    }

    func serverLog(_ group: String) async throws -> [Entry] {
        try await Client<Log>().response(for: HTTPRequest("fixture/track-log/\(group)")).entries.sorted {
            $0.start < $1.start
        }
    }

    @Test func waitUntilDoneRequestsNeverOverlapOrReorderOnTheServer() async throws {
        let group = UUID().uuidString
        let (client, ends) = clientWithEnds(APIRawResponse.self)
        let tasks = ["add", "update", "remove"].map { client.send(tracked(group, $0, .waitUntilDone)) }
        for task in tasks { await ends.waitForEnd(of: task) }
        let log = try await serverLog(group)
        #expect(log.map(\.name) == ["add", "update", "remove"])
        for (earlier, later) in zip(log, log.dropFirst()) { #expect(earlier.end <= later.start) }
    }

    @Test func aLimitOfTwoNeverRunsMoreThanTwoOnTheServer() async throws {
        let group = UUID().uuidString
        let (client, ends) = clientWithEnds(APIRawResponse.self)
        let tasks = (0..<6).map { index in
            var request = tracked(group, "thumb \(index)", .limited, delay: 0.3)
            request.concurrencyLimit = 2
            return client.send(request)
        }
        for task in tasks { await ends.waitForEnd(of: task) }
        let log = try await serverLog(group)
        #expect(log.count == 6)
        // At any request's start, at most one other was still running on the server.
        for entry in log {
            let overlapping = log.filter { $0.name != entry.name && $0.start < entry.start && $0.end > entry.start }
            #expect(overlapping.count <= 1, "\(entry.name) started while \(overlapping.map(\.name)) ran")
        }
    }

    @Test func aGroupSharedByTwoManagersNeverRunsMoreThanItsLimitOnTheServer() async throws {
        let group = UUID().uuidString
        let shared = APIConcurrencyPolicy.Group(limit: 2)
        let clients = [Client<APIRawResponse>(), Client<APIRawResponse>()]  // two engines
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in 0..<6 {
                var request = tracked(group, "image \(index)", .default, delay: 0.3)
                request.group = shared
                let client = clients[index % 2]
                tasks.addTask { _ = try await client.response(for: request) }
            }
            try await tasks.waitForAll()
        }
        let log = try await serverLog(group)
        #expect(log.count == 6)
        for entry in log {
            let overlapping = log.filter { $0.name != entry.name && $0.start < entry.start && $0.end > entry.start }
            #expect(overlapping.count <= 1, "\(entry.name) started while \(overlapping.map(\.name)) ran")
        }
        #expect(shared.runningCount == 0 && shared.waitingCount == 0)
    }

    @Test func identicalRequestsInFlightReachTheServerOnce() async throws {
        let group = UUID().uuidString
        let (client, ends) = clientWithEnds(APIRawResponse.self)
        let tasks = (0..<3).map { _ in
            var request = tracked(group, "profile", .default, delay: 0.5)
            request.sharing = .safeMethods
            return client.send(request)
        }
        for task in tasks { await ends.waitForEnd(of: task) }
        let states = tasks.map { "\($0.state)" }
        #expect(states == ["finished", "finished", "finished"])
        #expect(try await serverLog(group).count == 1, "one request on the wire for three senders")
    }

    @Test func cancelOthersLeavesOnlyTheLatestQuery() async throws {
        let (client, ends) = clientWithEnds(Echoed.self)
        // Typed in quick succession: each query is sent while the previous ones are on the wire
        // (the server holds each for 1 s), so each cancels them.
        let tasks = ["s", "sw", "swi", "swift"].map { query in
            var request = HTTPRequest("delay/1", parameters: ["q": .string(query)])
            request.concurrencyPolicy = .cancelOthers
            return client.send(request)
        }
        for task in tasks { await ends.waitForEnd(of: task) }
        let states = tasks.map { "\($0.state)" }
        let cancelledByPolicy = tasks.dropLast().map { task in
            if case .failed(.cancelled(.policy)) = task.state { true } else { false }
        }
        #expect(cancelledByPolicy == [true, true, true], "\(states)")
        guard case .finished = tasks.last?.state else {
            Issue.record("the latest query did not finish: \(states)")
            return
        }
    }

    @Test func ignoreCurrentIgnoresASecondPullWhileTheFirstRuns() async throws {
        let group = UUID().uuidString
        let (client, ends) = clientWithEnds(APIRawResponse.self)
        let first = client.send(tracked(group, "pull 1", .ignoreCurrent))
        let second = client.send(tracked(group, "pull 2", .ignoreCurrent))
        guard case .failed(.ignored) = second.state else {
            Issue.record("the second pull was not ignored: \(second.state)")
            return
        }
        await ends.waitForEnd(of: first)
        #expect(try await serverLog(group).map(\.name) == ["pull 1"])
    }

    @Test func defaultRequestsRunSideBySide() async throws {
        let group = UUID().uuidString
        let (client, ends) = clientWithEnds(APIRawResponse.self)
        // The server holds each until all three have reached it (at most 10 s): sent side by side, they
        // overlap however busy the machine is (a fixed 1.5 s hold failed once beside the other suites);
        // sent one after another, the first is held the whole 10 s and ends before the second starts.
        let tasks = (1...3).map { client.send(tracked(group, "r\($0)", .default, delay: 10, together: 3)) }
        for task in tasks { await ends.waitForEnd(of: task) }
        let log = try await serverLog(group)
        #expect(log.count == 3)
        // All three were on the server at once.
        #expect((log.map(\.start).max() ?? 0) < (log.map(\.end).min() ?? 0))
    }
}
