import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("APIEngine.Configuration: an engine made from one value", .timeLimit(.minutes(1)))
struct EngineConfigurationTests {
    @Test func anEngineMadeFromAConfigurationUsesEachSetting() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.defaultHeaders = .none
        configuration.cookies = APICookieStore()
        configuration.circuitBreaker = APIEngine.CircuitBreaker(failureThreshold: 2)
        let manager = TestManager(engine: APIEngine(configuration: configuration))
        let recorder = EventRecorder()
        manager.delegate = recorder
        let task = manager.send(TestRequest("/ok"))
        // Inline on both counts: the task has ended inside `send(_:)`.
        #expect(task.state.name == "finished")
        let sent = try #require(transport.records.first?.request)
        #expect(sent.value(forHTTPHeaderField: "User-Agent") == nil)
        let engine = manager.engine
        #expect(engine.transport as? MockTransport === transport)
        #expect(engine.cookies === configuration.cookies)
        #expect(engine.circuitBreaker == configuration.circuitBreaker)
        #expect(engine.defaultHeaders == .none)
        guard case .inline = engine.execution, case .inline = engine.delivery else {
            Issue.record("the engine's execution and delivery are not the configuration's")
            return
        }
    }

    @Test func theDefaultsAreThoseOfTheInitializer() {
        let configuration = APIEngine.Configuration()
        let engine = APIEngine()
        #expect(configuration.defaultHeaders == engine.defaultHeaders)
        #expect(configuration.transport as? URLSessionTransport === URLSessionTransport.shared)
        #expect(configuration.interceptors.isEmpty && configuration.cache == nil && configuration.cookies == nil)
        #expect(configuration.circuitBreaker == nil && configuration.retryBudget == nil)
        guard case .lanes(let lanes) = configuration.execution, case .lanes(let engineLanes) = engine.execution,
            lanes === engineLanes, lanes === APIEngine.WorkLanes.shared
        else {
            Issue.record("the configuration's execution is not the initializer's default")
            return
        }
        guard case .queue(let queue) = configuration.delivery, case .queue(let engineQueue) = engine.delivery
        else {
            Issue.record("the configuration's delivery is not the initializer's default")
            return
        }
        #expect(queue.label == engineQueue.label)
    }

    @Test func anEnginesConfigurationMakesAnEngineWithTheSameSettings() {
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let original = APIEngine(
            transport: MockTransport(), delivery: .inline, execution: .inline, cache: cache, defaultHeaders: .none,
            retryBudget: APIEngine.RetryBudget(ratio: 0.2))
        original.delivery = .queue(.global())
        let copy = APIEngine(configuration: original.configuration)
        #expect(copy.cache === cache)
        #expect(copy.transport as? MockTransport === original.transport as? MockTransport)
        #expect(copy.defaultHeaders == .none)
        #expect(copy.retryBudget == APIEngine.RetryBudget(ratio: 0.2))
        // The delivery as it is now, not as it was made.
        guard case .queue = copy.delivery, case .inline = copy.execution else {
            Issue.record("the copy's delivery or execution differs")
            return
        }
    }

    @Test func everySettingOfTheInitializerIsKeptAndGivenBack() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let cookies = APICookieStore()
        let cache = APIResponseCache(memoryBudget: 1 << 20, disk: nil)
        let engine = APIEngine(
            transport: transport, clock: clock, randomSource: FixedRandom(value: 0.5), delivery: .inline,
            execution: .inline,
            cache: cache, persistedHeaders: APIAuthentication.PersistedHeaders(names: ["client"]),
            interceptors: [Stamp()], defaultHeaders: .none, cookies: cookies,
            circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 7),
            retryBudget: APIEngine.RetryBudget(ratio: 0.3))
        let configuration = engine.configuration
        #expect(configuration.transport as? MockTransport === transport)
        #expect(configuration.clock as? TestClock === clock)
        #expect(configuration.randomSource is FixedRandom)
        #expect(configuration.cache === cache && configuration.cookies === cookies)
        #expect(configuration.persistedHeaders?.names == ["client"])
        #expect(configuration.interceptors.count == 1 && engine.interceptors.count == 1)
        #expect(configuration.defaultHeaders == .none)
        #expect(configuration.circuitBreaker == APIEngine.CircuitBreaker(failureThreshold: 7))
        #expect(configuration.retryBudget == APIEngine.RetryBudget(ratio: 0.3))
        #expect(configuration.authentication == nil && configuration.durableStore == nil)
        #expect(configuration.connectivity == nil && configuration.observers.isEmpty)
    }

    @Test func credentialsAndPersistedHeadersGivenInAConfigurationReachTheWire() throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let authentication = APIAuthentication(authenticator: MockAuthenticator(), clock: clock)
        authentication.signIn(with: APIAuthentication.Credential(accessToken: "token-1"))
        let persisted = APIAuthentication.PersistedHeaders(names: ["client"])
        let origin = try #require(APIAuthentication.PersistedHeaders.origin(of: testBaseURL))
        persisted.store.save(["client": "c-1"], forOrigin: origin)
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.authentication = authentication
        configuration.persistedHeaders = persisted
        let manager = TestManager(engine: APIEngine(configuration: configuration))
        manager.send(TestRequest("/ok"))
        let sent = try #require(transport.records.first?.request)
        #expect(sent.value(forHTTPHeaderField: "Authorization") == "Bearer token-1")
        #expect(sent.value(forHTTPHeaderField: "client") == "c-1")
        #expect(manager.engine.configuration.authentication === authentication)
        #expect(manager.engine.configuration.persistedHeaders?.names == ["client"])
    }
}

/// An adapter that changes nothing.
private struct Stamp: APIRequestAdapter {
    func adapt(_ request: URLRequest, for attempt: APIAttempt) async throws -> URLRequest { request }
}
