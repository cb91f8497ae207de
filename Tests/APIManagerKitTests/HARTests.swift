import Foundation
import Testing

@testable import APIManagerKit
@testable import APIManagerKitTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request with a body, headers and query items of its own.
struct RecordedRequest: APIRequest {
    var url = testBaseURL
    var path: String
    var method: HTTPMethod = .post
    var headers: [String: String] = [:]
    var queryItems: [String: String] = [:]
    var body: APIRequestBody?
    var retryPolicy: APIRetryPolicy?
    var parameters: APIParameters { queryItems.isEmpty ? .none : .query(queryItems.mapValues { .string($0) }) }
}

final class RecordingManager: APIManager {
    typealias Request = RecordedRequest
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// A recorder on an engine of a mock transport and a virtual clock.
struct RecordingSession {
    let clock = TestClock()
    let transport: MockTransport
    let recorder: APIEngine.HARRecorder
    let manager: RecordingManager

    init(bodyLimit: Int = 64 << 10, maxEntries: Int = 10_000) {
        transport = MockTransport(clock: clock)
        recorder = APIEngine.HARRecorder(bodyLimit: bodyLimit, maxEntries: maxEntries)
        manager = RecordingManager(engine: observedEngine([recorder], transport: transport, clock: clock))
    }

    /// Sends `request` and advances the clock until it ends.
    @discardableResult
    func run(_ request: RecordedRequest, advancing seconds: TimeInterval = 5) -> APITask<RecordedRequest> {
        let task = manager.send(request)
        clock.advance(by: seconds)
        return task
    }
}

@Suite("HAR: the recorder", .timeLimit(.minutes(1)))
struct HARRecorderTests {
    @Test func everyAttemptIsAnEntryWithItsRequestAnswerAndTimings() throws {
        let session = RecordingSession()
        session.transport.stub(
            .post, "/orders", MockTransport.Reply.failure(.networkConnectionLost).after(0.1),
            MockTransport.Reply.json(#"{"id":7}"#, status: 201, headers: ["X-Trace": "t1"]).after(0.25))
        var request = RecordedRequest(path: "/orders")
        request.body = try .json(["sku": "A", "quantity": "1"])
        request.retryPolicy = APIRetryPolicy(
            maxAttempts: 2, baseDelay: 0.5, jitter: .none, retriesNonIdempotentRequests: true)
        let task = session.run(request)
        #expect(task.state == .finished)
        let entries = session.recorder.entries
        try #require(entries.count == 2)
        #expect(entries.map(\.attempt) == [1, 2])
        #expect(entries.map(\.task) == [task.identifier, task.identifier])
        // The failed attempt: status 0, the error and its URLError code.
        #expect(entries[0].response.status == 0)
        #expect(entries[0].errorCode == URLError.Code.networkConnectionLost.rawValue)
        #expect(entries[0].error?.isEmpty == false)
        #expect(entries[0].time == 100)
        // The answer: status, headers by name, body as text, the time it took on the engine's clock.
        let answer = entries[1]
        #expect(answer.request.method == "POST")
        #expect(answer.request.url == "https://api.test/orders")
        #expect(answer.request.postData?.mimeType.hasPrefix("application/json") == true)
        let sent = try JSONDecoder().decode(
            [String: String].self, from: Data((answer.request.postData?.text ?? "").utf8))
        #expect(sent == ["quantity": "1", "sku": "A"])
        #expect(answer.response.status == 201)
        #expect(answer.response.statusText == "Created")
        #expect(answer.response.headers.contains(.init(name: "X-Trace", value: "t1")))
        #expect(answer.response.content.text == #"{"id":7}"#)
        #expect(answer.response.content.size == 8)
        #expect(answer.time == 250)
        #expect(answer.timings.wait + answer.timings.receive == 250)
        #expect(answer.error == nil)
    }

    @Test func secretsAreRedactedByTheOneRuleInRequestsAndResponses() throws {
        let session = RecordingSession()
        session.transport.stub(
            .post, "/token", .json(#"{"access_token":"abc","expires_in":60}"#, headers: ["Set-Cookie": "sid=1"]))
        var request = RecordedRequest(path: "/token")
        request.headers = ["Authorization": "Bearer s3cret", "X-Client": "app"]
        request.queryItems = ["api_key": "k1", "page": "2"]
        request.body = APIRequestBody(
            data: Data("password=hunter2&user=ada".utf8), contentType: "application/x-www-form-urlencoded")
        session.run(request)
        let entry = try #require(session.recorder.entries.first)
        let text = String(decoding: try session.recorder.har.encoded(), as: UTF8.self)
        for secret in ["s3cret", "k1", "hunter2", "abc", "sid=1"] {
            #expect(!text.contains(secret), "\(secret) is in the archive")
        }
        #expect(entry.request.headers.contains(.init(name: "Authorization", value: "***")))
        #expect(entry.request.headers.contains(.init(name: "X-Client", value: "app")))
        #expect(entry.request.queryString.contains(.init(name: "api_key", value: "***")))
        #expect(entry.request.queryString.contains(.init(name: "page", value: "2")))
        #expect(entry.request.postData?.text.contains("user=ada") == true)
        #expect(entry.response.headers.contains(.init(name: "Set-Cookie", value: "***")))
        #expect(entry.response.content.text?.contains("expires_in") == true)
    }

    @Test func bodiesPastTheLimitFilesAndBytesAreNotedAsSuch() throws {
        let folder = TemporaryFolder()
        try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
        let file = folder.url.appendingPathComponent("photo.bin")
        try Data(repeating: 7, count: 3000).write(to: file)
        let session = RecordingSession(bodyLimit: 100)
        session.transport.stub(.post, "/upload", .status(201, body: Data(repeating: 0x41, count: 500)))
        session.transport.stub(.post, "/bytes", .status(200, body: Data([0xFF, 0xFE, 0x00])))
        var upload = RecordedRequest(path: "/upload")
        upload.body = .file(file, contentType: "application/octet-stream")
        session.run(upload)
        var bytes = RecordedRequest(path: "/bytes")
        bytes.body = APIRequestBody(data: Data([0x00, 0xC3]), contentType: "application/octet-stream")
        session.run(bytes)
        let entries = session.recorder.entries
        try #require(entries.count == 2)
        #expect(entries[0].request.bodySize == 3000)
        #expect(entries[0].request.postData?.text == "")
        #expect(entries[0].request.postData?.comment?.contains("3000 bytes") == true)
        #expect(entries[0].response.content.text == nil)
        #expect(entries[0].response.content.size == 500)
        #expect(entries[0].response.content.comment?.contains("limit of 100") == true)
        #expect(entries[1].request.postData?.encoding == "base64")
        #expect(entries[1].request.postData?.text == Data([0x00, 0xC3]).base64EncodedString())
        #expect(entries[1].response.content.encoding == "base64")
        #expect(entries[1].response.content.data == Data([0xFF, 0xFE, 0x00]))
    }

    @Test func theOldestEntriesGoPastTheLimitAndTheLogSaysHowMany() {
        let session = RecordingSession(maxEntries: 2)
        session.transport.stub(nil, "/n", .json("{}"))
        for _ in 0..<5 { session.run(RecordedRequest(path: "/n", method: .get)) }
        let har = session.recorder.har
        #expect(har.log.entries.count == 2)
        #expect(har.log.comment == "3 older entries were dropped past the limit of 2")
        session.recorder.removeAll()
        #expect(session.recorder.har.log.entries.isEmpty)
        #expect(session.recorder.har.log.comment == nil)
    }

    @Test func theFileIsTheOwnersAloneAndWhole() throws {
        let folder = TemporaryFolder()
        try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
        let session = RecordingSession()
        session.transport.stub(nil, "/a", .json(#"{"a":1}"#))
        session.run(RecordedRequest(path: "/a", method: .get))
        let url = folder.url.appendingPathComponent("session.har")
        try session.recorder.write(to: url)
        let permissions = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let read = try APIEngine.HAR.read(from: url)
        #expect(read == session.recorder.har)
        #expect(read.log.version == "1.2")
        #expect(read.log.creator.name == "APIManagerKit")
        // A second write replaces the file whole; nothing is left beside it.
        session.run(RecordedRequest(path: "/a", method: .get))
        try session.recorder.write(to: url)
        #expect(try APIEngine.HAR.read(from: url).log.entries.count == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path) == ["session.har"])
        // A folder that is not there: a clear error naming the path, and no file.
        let missing = folder.url.appendingPathComponent("missing/session.har")
        let error = #expect(throws: CocoaError.self) { try session.recorder.write(to: missing) }
        #expect(error?.code == .fileWriteUnknown)
        #expect(!FileManager.default.fileExists(atPath: missing.path))
    }

    @Test func theArchiveHasHARsFieldsAndTheEnginesExtras() throws {
        let session = RecordingSession()
        session.transport.stub(nil, "/a", .json(#"{"a":1}"#))
        session.run(RecordedRequest(path: "/a", method: .get))
        let json = try #require(
            try JSONSerialization.jsonObject(with: session.recorder.har.encoded()) as? [String: Any])
        let log = try #require(json["log"] as? [String: Any])
        let entry = try #require((log["entries"] as? [[String: Any]])?.first)
        for key in ["startedDateTime", "time", "request", "response", "cache", "timings", "_task", "_attempt"] {
            #expect(entry[key] != nil, "\(key)")
        }
        let request = try #require(entry["request"] as? [String: Any])
        for key in ["method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"] {
            #expect(request[key] != nil, "\(key)")
        }
        let response = try #require(entry["response"] as? [String: Any])
        for key in [
            "status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL", "headersSize",
            "bodySize",
        ] {
            #expect(response[key] != nil, "\(key)")
        }
        let started = try #require(entry["startedDateTime"] as? String)
        #expect(try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(started) <= Date())
    }
}

@Suite("HAR: replaying a recording on MockTransport", .timeLimit(.minutes(1)))
struct HARReplayTests {
    /// A recording of three exchanges: a search asked twice (two answers), a failure, an order.
    static func recording() throws -> APIEngine.HAR {
        let session = RecordingSession()
        session.transport.stub(
            .get, "/search", MockTransport.Reply.json(#"{"page":1}"#).after(0.2),
            MockTransport.Reply.json(#"{"page":2}"#).after(0.3))
        session.transport.stub(.get, "/flaky", MockTransport.Reply.failure(.timedOut).after(0.1))
        session.transport.stub(.post, "/orders", .json(#"{"id":7}"#, status: 201))
        var search = RecordedRequest(path: "/search", method: .get)
        search.queryItems = ["q": "tea", "token": "t0"]
        session.run(search)
        session.run(search)
        session.run(RecordedRequest(path: "/flaky", method: .get))
        var order = RecordedRequest(path: "/orders")
        order.body = try .json(["sku": "A"])
        session.run(order)
        return session.recorder.har
    }

    @Test func theSameRequestsGetTheRecordedAnswersInOrderAfterTheRecordedTime() throws {
        let replay = RecordingSession()
        replay.transport.replay(try Self.recording(), timing: .recorded)
        var search = RecordedRequest(path: "/search", method: .get)
        search.queryItems = ["q": "tea", "token": "another"]  // the token was redacted: any value
        let first = replay.manager.send(search)
        replay.clock.advance(by: 0.19)
        #expect(first.state == .running)
        replay.clock.advance(by: 0.02)
        #expect(first.state == .finished)
        let second = replay.run(search)
        #expect(second.state == .finished)
        let bodies = replay.recorder.entries.map { $0.response.content.text }
        #expect(bodies == [#"{"page":1}"#, #"{"page":2}"#])
        #expect(replay.recorder.entries.map(\.time) == [200, 300])
        let flaky = replay.run(RecordedRequest(path: "/flaky", method: .get))
        guard case .failed(.transport(let error as URLError)) = flaky.state else {
            Issue.record("expected the recorded failure, got \(flaky.state)")
            return
        }
        #expect(error.code == .timedOut)
        var order = RecordedRequest(path: "/orders")
        order.body = try .json(["sku": "A"])
        #expect(replay.run(order).state == .finished)
        #expect(replay.transport.unusedStubs.isEmpty)
    }

    @Test func whatTheRecordingLacksFailsNamingItAndWhatIsLeft() throws {
        let replay = RecordingSession()
        replay.transport.replay(try Self.recording(), timing: .immediate)
        var other = RecordedRequest(path: "/orders")
        other.body = try .json(["sku": "B"])  // recorded with A
        let task = replay.manager.send(other)
        guard case .failed(.transport(let error as MockTransport.UnmatchedRequest)) = task.state else {
            Issue.record("expected an unmatched request, got \(task.state)")
            return
        }
        #expect(error.description.contains("POST https://api.test/orders"))
        #expect(error.description.contains("/search"))
        // A third search: the recording had two.
        var search = RecordedRequest(path: "/search", method: .get)
        search.queryItems = ["q": "tea", "token": "t"]
        #expect(replay.manager.send(search).state == .finished)
        #expect(replay.manager.send(search).state == .finished)
        #expect(replay.manager.send(search).state != .finished)
        #expect(replay.transport.unusedStubs.count == 2)  // the failure and the order
        search.queryItems = ["q": "coffee", "token": "t"]
        #expect(replay.manager.send(search).state != .finished)
    }

    @Test func newEpisodesAreSentLiveRecordedAndWrittenAfterTheRecording() throws {
        let recording = try Self.recording()
        let live = MockTransport(clock: TestClock())
        live.stub(.get, "/new", .json(#"{"fresh":true}"#, headers: ["Set-Cookie": "sid=2"]))
        let newEpisodes = APIEngine.HARRecorder()
        let replay = RecordingSession()
        replay.transport.replay(recording, timing: .immediate, sendingMissesWith: live, into: newEpisodes)
        var search = RecordedRequest(path: "/search", method: .get)
        search.queryItems = ["q": "tea", "token": "t"]
        #expect(replay.manager.send(search).state == .finished)
        #expect(live.records.isEmpty)  // what the recording has is not sent
        let fresh = replay.manager.send(RecordedRequest(path: "/new", method: .get))
        #expect(fresh.state == .finished)
        #expect(live.records.map(\.path) == ["/new"])
        #expect(replay.transport.records.last?.outcome == .completed)
        let episode = try #require(newEpisodes.entries.first)
        #expect(newEpisodes.entries.count == 1)
        #expect(episode.request.url == "https://api.test/new")
        #expect(episode.response.content.text == #"{"fresh":true}"#)
        #expect(episode.response.headers.contains(.init(name: "Set-Cookie", value: "***")))

        let folder = TemporaryFolder()
        try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
        let cassette = folder.url.appendingPathComponent("cassette.har")
        try newEpisodes.write(to: cassette, after: recording)
        let grown = try APIEngine.HAR.read(from: cassette)
        #expect(grown.log.entries.count == recording.log.entries.count + 1)
        #expect(grown.log.entries.last == episode)
        // Replayed alone, the grown file answers the new request too.
        let again = RecordingSession()
        again.transport.replay(grown, timing: .immediate)
        #expect(again.manager.send(RecordedRequest(path: "/new", method: .get)).state == .finished)
    }

    @Test func aBodyRecordedInPartsIsReplayedInAsManyAfterItsHead() throws {
        var entry = try #require(try Self.recording().log.entries.first)
        entry.time = 900
        entry.timings = APIEngine.HAR.Timings(wait: 300, receive: 600)
        entry.chunks = [.init(size: 4, time: 0), .init(size: 4, time: 300), .init(size: 3, time: 600)]
        let staged = MockTransport.reply(for: entry, timing: .recorded)
        #expect(staged.chunks == 3)
        #expect(staged.latency == 0.3)
        #expect(abs(staged.chunkInterval - 0.3) < 1e-9)
        let whole = MockTransport.reply(for: entry, timing: .immediate)
        #expect(whole.chunks == 1 && whole.latency == 0)
        entry.chunks = Array(repeating: .init(size: 0, time: 0), count: 1_000_000)  // more parts than bytes
        #expect(MockTransport.reply(for: entry, timing: .recorded).chunks == entry.response.content.data?.count)
        entry.chunks = nil
        #expect(MockTransport.reply(for: entry, timing: .recorded).latency == 0.9)
    }

    @Test func anArchiveFromElsewhereIsReadAndReplayed() throws {
        // The shape browsers write: no extras, a response header twice, a query in the URL.
        let text = #"""
            {"log":{"version":"1.2","creator":{"name":"WebInspector","version":"537.36"},"pages":[],
            "entries":[{"startedDateTime":"2026-11-29T10:00:00.000Z","time":42.5,
            "request":{"method":"GET","url":"https://api.test/items?page=2","httpVersion":"HTTP/2","cookies":[],
            "headers":[{"name":"Accept","value":"*/*"}],"queryString":[{"name":"page","value":"2"}],"headersSize":-1,"bodySize":0},
            "response":{"status":200,"statusText":"OK","httpVersion":"HTTP/2","cookies":[],
            "headers":[{"name":"Vary","value":"Accept"},{"name":"Vary","value":"Origin"}],
            "content":{"size":11,"mimeType":"application/json","text":"eyJpdGVtcyI6W119","encoding":"base64"},
            "redirectURL":"","headersSize":-1,"bodySize":11},
            "cache":{},"timings":{"blocked":-1,"dns":-1,"connect":-1,"send":0.1,"wait":40,"receive":2.4,"ssl":-1}}]}}
            """#
        let har = try JSONDecoder().decode(APIEngine.HAR.self, from: Data(text.utf8))
        let replay = RecordingSession()
        replay.transport.replay(har)
        var request = RecordedRequest(path: "/items", method: .get)
        request.queryItems = ["page": "2"]
        let task = replay.manager.send(request)
        replay.clock.advance(by: 0.0425)
        #expect(task.state == .finished)
        let entry = try #require(replay.recorder.entries.first)
        #expect(entry.response.content.text == #"{"items":[]}"#)
        #expect(entry.response.headers.contains(.init(name: "Vary", value: "Accept, Origin")))
    }
}

@Suite("HAR: what the recorder records in the variants users hit", .timeLimit(.minutes(1)))
struct HARRecorderVariantTests {
    /// An engine on a mock transport and a virtual clock with a recorder, a memory cache and `execution`.
    static func engine(
        _ transport: MockTransport, _ clock: TestClock, recorder: APIEngine.HARRecorder,
        execution: APIEngine.Execution = .inline
    ) -> TestManager {
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = execution
        configuration.cache = APIResponseCache(disk: nil, clock: clock)
        configuration.observers = [recorder]
        return TestManager(engine: APIEngine(configuration: configuration))
    }

    @Test func anAnswerFromTheCacheIsNoExchangeAndIsNotRecorded() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#, headers: ["Cache-Control": "max-age=60"]))
        let recorder = APIEngine.HARRecorder()
        let manager = Self.engine(transport, clock, recorder: recorder)
        var request = TestRequest("/ok", scope: "feed")
        request.cacheOption = .cacheOnly
        #expect(manager.send(request).state == .finished)
        #expect(manager.send(request).state == .finished)  // from the cache
        #expect(transport.records.count == 1)
        #expect(recorder.entries.count == 1)
    }

    @Test func tasksThatShareOneExchangeAreOneEntry() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", MockTransport.Reply.json(#"{"value":"ok"}"#).after(0.1))
        let recorder = APIEngine.HARRecorder()
        let manager = Self.engine(transport, clock, recorder: recorder)
        var request = TestRequest("/ok")
        request.sharing = .safeMethods
        let first = manager.send(request)
        let second = manager.send(request)
        clock.advance(by: 0.1)
        #expect(first.state == .finished && second.state == .finished)
        #expect(transport.records.count == 1)
        #expect(recorder.entries.map(\.task) == [first.identifier])
    }

    @Test func aTaskCancelledWhileWaitingIsNotRecordedAndOneCancelledInFlightIsNotAnExchange() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/slow", MockTransport.Reply.json(#"{"value":"slow"}"#).after(1))
        let recorder = APIEngine.HARRecorder()
        let manager = Self.engine(transport, clock, recorder: recorder)
        let running = manager.send(TestRequest("/slow", .waitUntilDone, scope: "cart"))
        let waiting = manager.send(TestRequest("/slow", .waitUntilDone, scope: "cart"))
        waiting.cancel()
        running.cancel()
        clock.advance(by: 2)
        #expect(transport.records.count == 1)
        // The cancelled attempt's end is told (status 0, the cancellation) or not told at all: never a response.
        #expect(recorder.entries.allSatisfy { $0.response.status == 0 && $0.task == running.identifier })
    }

    @Test func attemptsEndingOnOtherThreadsAreEachRecordedOnce() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let recorder = APIEngine.HARRecorder()
        let manager = Self.engine(transport, clock, recorder: recorder, execution: .concurrent())
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask { _ = try? await manager.response(for: TestRequest("/ok", scope: "s\(index % 3)")) }
            }
        }
        #expect(recorder.entries.count == 200)
        #expect(Set(recorder.entries.compactMap(\.task)).count == 200)
    }
}
