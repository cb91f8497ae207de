import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Auth and monitoring", .timeLimit(.minutes(1)))
struct AuthAndMonitoringTests {
    func manager(
        _ transport: MockTransport, _ clock: TestClock, persisted: APIAuthentication.PersistedHeaders? = nil,
        cache: APIResponseCache? = nil
    ) -> TestManager {
        TestManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, cache: cache,
                persistedHeaders: persisted))
    }

    @Test func persistedHeadersAreCapturedAndSentBackToTheSameOriginOnly() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/sign_in", .json("{}", headers: ["access-token": "tok-1", "Client": "c-1", "uid": "ada"]))
        transport.stub(nil, "/me", .json("{}", headers: ["access-token": "tok-2"]))
        let store = APIAuthentication.InMemoryCredentialStore()
        let api = manager(transport, clock, persisted: APIAuthentication.PersistedHeaders(store: store))
        _ = try await api.response(for: TestRequest("/sign_in", method: .post))
        _ = try await api.response(for: TestRequest("/me"))
        _ = try await api.response(for: TestRequest("/me"))
        var elsewhere = TestRequest("/me")
        elsewhere.url = URL(string: "https://other.test")!
        _ = try await api.response(for: elsewhere)
        var overriding = TestRequest("/me")
        overriding.headers = ["access-token": "mine"]
        _ = try await api.response(for: overriding)

        let sent = transport.requests.map { $0.value(forHTTPHeaderField: "access-token") }
        #expect(sent == [nil, "tok-1", "tok-2", nil, "mine"])
        #expect(transport.requests[1].value(forHTTPHeaderField: "client") == "c-1")
        #expect(transport.requests[1].value(forHTTPHeaderField: "uid") == "ada")
        #expect(store.headers(forOrigin: "https://api.test:443")["uid"] == "ada")
        // The other origin's own response set its own entry; the first origin's client and uid stay its own.
        #expect(store.headers(forOrigin: "https://other.test:443") == ["access-token": "tok-2"])
    }

    @Test func persistedHeadersAreCapturedFromErrorResponsesToo() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/refuse", .json("{}", status: 401, headers: ["access-token": "rotated"]))
        let store = APIAuthentication.InMemoryCredentialStore()
        let api = manager(transport, clock, persisted: APIAuthentication.PersistedHeaders(store: store))
        _ = try? await api.response(for: TestRequest("/refuse"))
        #expect(store.headers(forOrigin: "https://api.test:443") == ["access-token": "rotated"])
    }

    @Test func responsesToRequestsCarryingPersistedHeadersAreNotCached() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/me", .json(#"{"value":"me"}"#))
        let store = APIAuthentication.InMemoryCredentialStore()
        store.save(["uid": "ada"], forOrigin: "https://api.test:443")
        let recorded = Locked<[APIResponseCache.Event]>([])
        let cache = APIResponseCache(
            disk: nil, clock: clock, eventHandler: { event in recorded.withLock { $0.append(event) } })
        let api = manager(transport, clock, persisted: APIAuthentication.PersistedHeaders(store: store), cache: cache)
        _ = try await api.response(for: TestRequest("/me"))
        let events = recorded.withLock { $0 }
        #expect(events.contains { "\($0)".contains("credentials") })
    }

    @Test func theFileStoreIsOwnerOnlyAndSurvivesARestart() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("creds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("auth.json")
        let store = APIAuthentication.FileCredentialStore(fileURL: file)
        store.save(["access-token": "t", "uid": "ada"], forOrigin: "https://api.test:443")
        store.save(["access-token": "t2"], forOrigin: "https://api.test:443")
        #expect(store.lastWriteError == nil)
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let reopened = APIAuthentication.FileCredentialStore(fileURL: file)
        #expect(reopened.headers(forOrigin: "https://api.test:443") == ["access-token": "t2", "uid": "ada"])
        reopened.removeHeaders(forOrigin: "https://api.test:443")
        #expect(APIAuthentication.FileCredentialStore(fileURL: file).headers(forOrigin: "https://api.test:443").isEmpty)
    }

    @Test func theFileStoreRemovesTheTemporaryFilesAKilledWriteLeftAndNoOthers() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("creds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("auth.json")
        let leftover = ".tmp-auth.json-\(UUID().uuidString)"
        let others = [
            ".tmp-auth.json.bak-\(UUID().uuidString)", ".tmp-auth.json-notes", "auth.json.txt",
            ".tmp-other-\(UUID().uuidString)",
        ]
        for name in [leftover] + others {
            try Data(#"{"o":{"access-token":"t"}}"#.utf8).write(to: directory.appendingPathComponent(name))
        }
        let store = APIAuthentication.FileCredentialStore(fileURL: file)
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        #expect(names == Set(others), "only the store's own leftover is removed")
        store.save(["uid": "ada"], forOrigin: "o")
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)) == Set(others + ["auth.json"]))
    }

    @Test func theFileStoreStartsEmptyOnACorruptFileAndReportsAFailedWrite() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("creds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("auth.json")
        try Data("not json".utf8).write(to: file)
        let store = APIAuthentication.FileCredentialStore(fileURL: file)
        #expect(store.headers(forOrigin: "x").isEmpty)
        // A directory where the file should be: the write fails, the value stays in memory.
        let blocked = APIAuthentication.FileCredentialStore(fileURL: directory)
        blocked.save(["uid": "ada"], forOrigin: "o")
        #expect(blocked.lastWriteError != nil)
        #expect(blocked.headers(forOrigin: "o") == ["uid": "ada"])
    }

    @Test func theEventMonitorSeesEachAttemptWithItsDuration() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(
            nil, "/flaky", MockTransport.Reply.status(503).after(0.25), MockTransport.Reply.json("{}").after(0.5))
        let api = manager(transport, clock)
        let seen = Locked<[APIEvent]>([])
        api.engine.eventMonitor = { event in seen.withLock { $0.append(event) } }
        var request = TestRequest("/flaky", retry: APIRetryPolicy(maxAttempts: 2, baseDelay: 0.1, jitter: .none))
        request.headers = ["Authorization": "Bearer secret"]
        api.send(request)
        clock.runUntilIdle()
        let events = seen.withLock { $0 }
        #expect(events.count == 4)
        let lines = events.map(\.description)
        #expect(lines[0].hasPrefix("→ GET https://api.test/flaky (task 1, attempt 1)"))
        #expect(lines[1].hasPrefix("← 503 GET https://api.test/flaky in 250.0 ms"))
        #expect(lines[3].hasPrefix("← 200 GET https://api.test/flaky in 500.0 ms"))
        #expect(events.map(\.attempt) == [1, 1, 2, 2])
        #expect(events[3].duration == 0.5)
        #expect(events[0].cURLDescription().contains("Authorization: ***"))
    }

    @Test func theEventMonitorReportsARequestThatCannotBeBuilt() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let api = manager(transport, clock)
        let seen = Locked<[String]>([])
        api.engine.eventMonitor = { event in seen.withLock { $0.append(event.description) } }
        api.send(TestRequest("/{missing}"))
        #expect(seen.withLock { $0 }.first?.hasPrefix("✕ ? (no request)") == true)
        #expect(transport.requests.isEmpty)
    }
}
