// `APIClient.Endpoint` and `APIClient` (issue 43, item 2): a request names its response type, and one client
// sends requests of many such types through one engine, typed, under the same policies, retries,
// cache, durable line and observers as a manager's.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

private struct GetItem: APIClient.Endpoint, Codable {
    typealias Response = Echo
    var id: Int
    var url: URL { URL(string: "/items/\(id)")! }
    var concurrencyPolicy: APIConcurrencyPolicy = .default
    var concurrencyScope: String?
    var retryPolicy: APIRetryPolicy?
    var parameters: APIParameters { .none }
    /// A replayed task is durable whatever its record says: only these are kept.
    private enum CodingKeys: String, CodingKey { case id, concurrencyScope }
}

private struct CachedItem: APIClient.Endpoint {
    typealias Response = Echo
    var id: Int
    var path: String { "items/\(id)" }
    var cacheOption: APIResponseCache.Option = .networkOnly
}

private struct Count: APIResponse, Decodable, Equatable {
    var count: Int
}

private struct CountItems: APIClient.Endpoint {
    typealias Response = Count
    var url: URL { URL(string: "https://other.test/count")! }
    var concurrencyPolicy: APIConcurrencyPolicy = .default
    var concurrencyScope: String?
}

@Suite("APIClient: many endpoint types, one client", .timeLimit(.minutes(1)))
struct APIClientTests {
    /// An engine on `transport` and `clock`, inline, with a base URL.
    private func inlineEngine(
        _ transport: MockTransport, _ clock: TestClock, observers: [any APIEngine.Observer] = [],
        durableStore: APIEngine.DurableStore? = nil
    ) -> APIEngine {
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.baseURL = URL(string: "https://shop.test/api/")
        configuration.observers = observers
        configuration.durableStore = durableStore
        return APIEngine(configuration: configuration)
    }

    private func inlineClient(observers: [any APIEngine.Observer] = []) -> (APIClient, MockTransport, TestClock) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        return (APIClient(engine: inlineEngine(transport, clock, observers: observers)), transport, clock)
    }

    @Test func twoEndpointTypesGetTheirOwnTypedResponsesFromOneClient() async throws {
        let (client, transport, _) = inlineClient()
        transport.stub(.get, "/api/items/2", .json(#"{"value":"two"}"#))
        transport.stub(.get, "/count", .json(#"{"count":5}"#))
        let item: Echo = try await client.response(for: GetItem(id: 2))
        let count: Count = try await client.response(for: CountItems())
        #expect(item == Echo(value: "two") && count == Count(count: 5))
        #expect(
            transport.records.compactMap { $0.request.url?.absoluteString } == [
                "https://shop.test/api/items/2", "https://other.test/count",
            ], "a relative URL joins the base URL; an absolute one wins")
    }

    @Test func eachRequestTypeHasOneManagerForTheClientsLife() {
        let (client, _, _) = inlineClient()
        #expect(client.manager(for: GetItem.self) === client.manager(for: GetItem.self))
        #expect(client.manager(for: GetItem.self).engine === client.engine)
        #expect(client.manager(for: CountItems.self).engine === client.engine)
    }

    @Test(arguments: [nil, "search"] as [String?])
    func policiesSpanRequestTypesInAScope(scope: String?) {
        let (client, transport, clock) = inlineClient()
        transport.stub(nil, "/api/items/1", .json(#"{"value":"one"}"#).after(1))
        transport.stub(nil, "/count", .json(#"{"count":1}"#).after(1))
        let results = Locked<[String]>([])
        client.send(GetItem(id: 1, concurrencyPolicy: .cancelOthers, concurrencyScope: scope)) { result in
            results.withLock { $0.append("item \(result.map { $0.value ?? "-" })") }
        }
        client.send(CountItems(concurrencyPolicy: .cancelOthers, concurrencyScope: scope)) { result in
            results.withLock { $0.append("count \(result.map { $0.count })") }
        }
        clock.advance(by: 1)
        #expect(
            results.withLock { $0 } == [
                "item failure(\(APIError.cancelled(reason: .policy)))", "count success(1)",
            ])
    }

    @Test func retriesAndTheDelegateOfATypesManagerWork() {
        let (client, transport, clock) = inlineClient()
        transport.stub(nil, "/api/items/3", .status(503), .json(#"{"value":"three"}"#))
        let recorder = EventRecorder()
        client.manager(for: GetItem.self).delegate = recorder
        let task = client.send(
            GetItem(id: 3, retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock.advance(by: 1)
        #expect(task.state == .finished && task.attemptCount == 2)
        #expect(recorder.events(of: task) == ["start 1", "retry 1.0", "start 2", "finished"])
    }

    @Test func theEnginesCacheAnswersAnEndpointsSecondCallAndTheCompletionHearsTheStoredCopyOnce() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.get, "/api/items/5", .json(#"{"value":"five"}"#, headers: ["Cache-Control": "max-age=60"]))
        var configuration = inlineEngine(transport, clock).configuration
        configuration.cache = APIResponseCache(disk: nil, clock: clock)
        let client = APIClient(configuration: configuration)
        var request = CachedItem(id: 5)
        request.cacheOption = .networkOnly
        client.send(request)
        request.cacheOption = .cacheOnly
        let heard = Locked<[String]>([])
        let task = client.send(request) { result in heard.withLock { $0.append("\(result.map { $0.value ?? "-" })") } }
        #expect(heard.withLock { $0 } == ["success(\"five\")"])
        #expect(task.responseSource == .cache)
        #expect(transport.records.count == 1)
    }

    @Test func cancelAllAndInFlightTasksAreTheClientsOnlyOnASharedEngine() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/api/items/1", .json("{}").after(5))
        transport.stub(nil, "/count", .json(#"{"count":0}"#).after(5))
        transport.stub(nil, "/other", .json("{}").after(5))
        let engine = inlineEngine(transport, clock)
        let client = APIClient(engine: engine)
        let manager = TestManager(engine: engine)
        var item = GetItem(id: 1)
        item.concurrencyScope = "a"
        let first = client.send(item)
        let second = client.send(CountItems(concurrencyScope: "b"))
        let others = manager.send(TestRequest("/other", scope: "c"))
        #expect(Set(client.inFlightTasks) == [first, second])
        client.cancelAll()
        #expect(first.state == .failed(.cancelled(reason: .explicit)))
        #expect(second.state == .failed(.cancelled(reason: .explicit)))
        #expect(others.state == .running)
        #expect(client.inFlightTasks.isEmpty && manager.inFlightTasks == [others])
    }

    @Test func theEnginesObserversSeeEveryTypesTasks() {
        let recorder = EndRecorder()
        let (client, transport, clock) = inlineClient(observers: [recorder])
        transport.stub(nil, "/api/items/1", .json("{}"))
        transport.stub(nil, "/count", .json(#"{"count":0}"#))
        client.send(GetItem(id: 1))
        client.send(CountItems())
        clock.runUntilIdle()
        #expect(recorder.ends.withLock { $0 } == 2)
    }

    @Test func releasingTheClientCancelsItsTasksAndTellsTheirCompletions() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/api/items/1", .json("{}").after(5))
        var client: APIClient? = APIClient(engine: inlineEngine(transport, clock))
        let outcome = Locked<[String]>([])
        client?.send(GetItem(id: 1)) { result in outcome.withLock { $0.append("\(result.map { _ in "ok" })") } }
        client = nil
        #expect(outcome.withLock { $0 } == ["failure(\(APIError.cancelled(reason: .managerReleased)))"])
    }

    @Test func aDurableLineOfOneEndpointTypeIsReplayedThroughItsManager() throws {
        let folder = TemporaryFolder("client-durable")
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/api/items/1", .failure(.notConnectedToInternet))
        func client() -> APIClient {
            APIClient(
                engine: inlineEngine(transport, clock, durableStore: APIEngine.DurableStore(directory: folder.url)))
        }
        var first: APIClient? = client()
        first?.send(GetItem(id: 1, concurrencyPolicy: .durable, concurrencyScope: "cart"))
        first = nil  // as a killed app: the record stays
        transport.stub(nil, "/api/items/1", .json(#"{"value":"again"}"#))
        let second = client()
        let replay = try second.manager(for: GetItem.self).replayDurableTasks(inScope: "cart")
        #expect(replay.count == 1)
        clock.runUntilIdle()
        #expect(transport.records.filter { $0.request.url?.path == "/api/items/1" }.count >= 2)
        #expect(second.inFlightTasks.isEmpty)
    }
}

/// Counts the tasks whose end the observers were told.
private final class EndRecorder: APIEngine.Observer {
    let ends = Locked(0)
    func observe(_ observation: APIEngine.Observation) {
        if case .ended = observation.kind { ends.withLock { $0 += 1 } }
    }
}

@Suite("APIClient: a durable line holds one request type")
struct APIClientDurableTypesTests {
    private struct AddNote: APIClient.Endpoint, Codable {
        typealias Response = APIEmptyResponse
        var text: String
        var url: URL { URL(string: "https://shop.test/notes")! }
        var method: HTTPMethod { .post }
        var concurrencyPolicy: APIConcurrencyPolicy { .durable }
        var concurrencyScope: String? { "cart" }
    }

    private struct AddLine: APIClient.Endpoint, Codable {
        typealias Response = APIEmptyResponse
        var sku: String
        var url: URL { URL(string: "https://shop.test/lines")! }
        var method: HTTPMethod { .post }
        var concurrencyPolicy: APIConcurrencyPolicy { .durable }
        var concurrencyScope: String? { "cart" }
    }

    @Test func aDurableRequestOfAnotherTypeIntoAScopeThatHoldsOneIsRefusedWithAClearError() {
        let folder = TemporaryFolder("client-durable-types")
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/notes", .status(204).after(1))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.durableStore = APIEngine.DurableStore(directory: folder.url)
        let client = APIClient(configuration: configuration)
        let note = client.send(AddNote(text: "gift"))
        let line = client.send(AddLine(sku: "A"))
        guard case .failed(.durableStore(let reason, _)) = line.state else {
            Issue.record("the second type was not refused: \(line.state)")
            return
        }
        #expect(reason.contains("AddNote") && reason.contains("AddLine") && reason.contains("cart"))
        clock.advance(by: 1)
        #expect(note.state == .finished)
        #expect(client.send(AddNote(text: "again")).state != line.state, "the scope's own type goes on")
    }
}
