import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport seam: the engine hands every transport an `APIHTTPRequest`; a transport written
/// for `URLRequest` keeps working through the protocol's adapter.
@Suite("The transport seam: one request value")
struct TransportSeamTests {
    struct SeamRequest: APIRequest {
        var url = testBaseURL
        var path = "/items"
        var method: HTTPMethod = .get
        var parameters: APIParameters = .none
        var body: APIRequestBody?
        var headers: [String: String] = [:]
        var timeout: TimeInterval = 60
        var totalTimeout: TimeInterval?
        var multipartInMemoryLimit = APIRequestDefaults.multipartInMemoryLimit
        var sharing: APIConcurrencyPolicy.Sharing = .never
        var concurrencyScope: String?
        var authorization: APIAuthentication.Authorization?
        var retryPolicy: APIRetryPolicy?
        var cacheOption: APIResponseCache.Option = .networkOnly
    }

    final class SeamManager: APIManager {
        typealias Request = SeamRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    /// Implements the new requirement alone: records each request value and what its body held,
    /// and answers at once from `answers` in turn, repeating the last (`200` unless given), or holds
    /// the answers until `release()`; counts the cancellations of the handles it gave.
    final class ValueTransport: APITransport, @unchecked Sendable {
        // @unchecked: `state` is only touched under `lock`.
        struct Sent {
            let request: APIHTTPRequest
            let options: APITransportOptions
            let bodyBytes: Data?
        }

        private let lock = NSLock()
        private var sent: [Sent] = []
        private var held: [@Sendable (Result<APIRawResponse, any Error>) -> Void] = []
        private var answers: [Result<APIRawResponse, URLError>]
        private var cancels = 0
        let acceptsBodyWriters: Bool
        let holds: Bool

        static let ok = APIRawResponse(statusCode: 200, headers: [:], body: Data("ok".utf8))

        init(
            acceptsBodyWriters: Bool = false, holds: Bool = false,
            answers: [Result<APIRawResponse, URLError>] = [.success(ok)]
        ) {
            self.acceptsBodyWriters = acceptsBodyWriters
            self.holds = holds
            self.answers = answers
        }

        var records: [Sent] { lock.withLock { sent } }
        var cancelCount: Int { lock.withLock { cancels } }

        private func nextAnswer() -> Result<APIRawResponse, any Error> {
            lock.withLock {
                let answer = answers[0]
                if answers.count > 1 { answers.removeFirst() }
                return answer.mapError { $0 }
            }
        }

        private struct Handle: APICancellable, @unchecked Sendable {
            // @unchecked: the transport counts under its lock.
            let transport: ValueTransport
            func cancel() { transport.lock.withLock { transport.cancels += 1 } }
        }

        func send(
            _ request: APIHTTPRequest, options: APITransportOptions,
            completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            var bytes: Data?
            switch request.body {
            case .none: bytes = nil
            case .data(let data): bytes = data
            case .file(let url): bytes = try? Data(contentsOf: url)
            case .stream(let stream): bytes = Self.readAll(stream.stream)
            case .writer(let writer):
                var written = Data()
                try? writer.write { written.append($0) }
                bytes = written
            }
            lock.withLock {
                sent.append(Sent(request: request, options: options, bodyBytes: bytes))
                if holds { held.append(completion) }
            }
            if !holds { completion(nextAnswer()) }
            return Handle(transport: self)
        }

        func release() {
            let completions = lock.withLock {
                defer { held = [] }
                return held
            }
            for completion in completions { completion(nextAnswer()) }
        }

        private static func readAll(_ stream: InputStream) -> Data {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            stream.open()
            defer { stream.close() }
            while true {
                let count = stream.read(&buffer, maxLength: buffer.count)
                if count <= 0 { return data }
                data.append(buffer, count: count)
            }
        }
    }

    private func manager(
        _ transport: any APITransport, authentication: APIAuthentication? = nil,
        execution: APIEngine.Execution = .inline, clock: TestClock = TestClock(), cache: APIResponseCache? = nil,
        persistedHeaders: APIAuthentication.PersistedHeaders? = nil
    ) -> SeamManager {
        SeamManager(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: execution, cache: cache,
                persistedHeaders: persistedHeaders, authentication: authentication))
    }

    // MARK: What the engine hands over

    @Test(arguments: [nil, "cart"] as [String?])
    func theTransportGetsTheRequestAsAValueOfItsOwn(scope: String?) throws {
        let transport = ValueTransport()
        let task = manager(transport).send(
            SeamRequest(
                path: "/items/{id}", method: .post, parameters: ["id": "7", "name": "Tea"],
                headers: ["X-Trace": "abc"], timeout: 12, totalTimeout: 30, concurrencyScope: scope,
                authorization: .bearer("s3cret")))
        #expect(task.state.name == "finished")
        let sent = try #require(transport.records.first)
        let request = sent.request
        #expect(request.method == .post)
        #expect(request.url.absoluteString == "https://api.test/items/7")
        #expect(request.value(forHeaderField: "x-trace") == "abc")
        #expect(request.value(forHeaderField: "Authorization") == "Bearer s3cret")
        #expect(request.value(forHeaderField: "content-type")?.hasPrefix("application/json") == true)
        #expect(request.value(forHeaderField: "User-Agent") != nil, "the engine's default headers are on it")
        #expect(request.timeout == 12 && request.totalTimeout == 30)
        guard case .data(let body) = request.body else {
            Issue.record("a JSON body is bytes in memory, not \(request.body)")
            return
        }
        #expect(try JSONSerialization.jsonObject(with: body) as? [String: String] == ["name": "Tea"])
        #expect(sent.options.sensitiveHeaders.isEmpty || sent.options.sensitiveHeaders.contains("Authorization"))
    }

    @Test func aFileBodyArrivesAsTheFileWithItsLength() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("seam-\(UUID().uuidString).bin")
        let bytes = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0) })
        try bytes.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = ValueTransport()
        manager(transport).send(SeamRequest(method: .put, body: .file(file)))
        let sent = try #require(transport.records.first)
        guard case .file(let url) = sent.request.body else {
            Issue.record("a file body is the file, not \(sent.request.body)")
            return
        }
        #expect(url == file)
        #expect(sent.request.value(forHeaderField: "Content-Length") == "5000")
        #expect(sent.request.bodyLength == 5000)
        #expect(sent.bodyBytes == bytes)
    }

    @Test func aStreamBodyArrivesAsTheStreamWithItsLength() throws {
        let bytes = Data("streamed body".utf8)
        let transport = ValueTransport()
        manager(transport).send(
            SeamRequest(method: .post, body: .stream(length: Int64(bytes.count)) { InputStream(data: bytes) }))
        let sent = try #require(transport.records.first)
        guard case .stream = sent.request.body else {
            Issue.record("a stream body is the stream, not \(sent.request.body)")
            return
        }
        #expect(sent.request.bodyLength == Int64(bytes.count))
        #expect(sent.bodyBytes == bytes)
    }

    @Test(arguments: [true, false])
    func aFormTooLargeForMemoryArrivesAsAWriterOnlyWhenTheTransportTakesOne(accepts: Bool) throws {
        try SpoolingTurns.take {
            let transport = ValueTransport(acceptsBodyWriters: accepts)
            let blob = Data(repeating: 0x41, count: 4096)
            manager(transport).send(
                SeamRequest(
                    method: .post, parameters: ["file": .file(APIFile(data: blob, fileName: "a.bin"))],
                    multipartInMemoryLimit: 1024))
            let sent = try #require(transport.records.first)
            switch sent.request.body {
            case .writer: #expect(accepts, "a writer only for a transport that takes one")
            case .file: #expect(!accepts, "else the form is written to a temporary file")
            default: Issue.record("a large form is a writer or a file, not \(sent.request.body)")
            }
            let body = try #require(sent.bodyBytes)
            #expect(sent.request.bodyLength == Int64(body.count))
            #expect(body.range(of: blob) != nil)
        }
    }

    /// The engine leaves a large form unwritten only while it builds for a transport that takes
    /// writers: the flag that says so belongs to that build, on its thread, and to nothing else.
    @Test func aFormIsLeftUnwrittenOnlyInsideTheEnginesBuildForAWriterTransport() throws {
        try SpoolingTurns.take {
            let blob = Data(repeating: 0x42, count: 4096)
            let form = SeamRequest(
                method: .post, parameters: ["file": .file(APIFile(data: blob, fileName: "b.bin"))],
                multipartInMemoryLimit: 1024)
            let results = Locked<[Int: String]>([:])
            DispatchQueue.concurrentPerform(iterations: 16) { index in
                if index.isMultiple(of: 2) {
                    let transport = ValueTransport(acceptsBodyWriters: true)
                    manager(transport).send(form)
                    let kind = transport.records.first.map { record -> String in
                        if case .writer = record.request.body { return "writer" }
                        return "other"
                    }
                    results.withLock { $0[index] = kind ?? "none" }
                } else {
                    // Built by hand on another thread meanwhile: written to a temporary file.
                    let kind: String
                    if let built = try? form.makeURLRequest(), let value = try? APIHTTPRequest(built) {
                        if case .file = value.body { kind = "file" } else { kind = "other" }
                    } else {
                        kind = "failed"
                    }
                    results.withLock { $0[index] = kind }
                }
            }
            let kinds = results.withLock { $0 }
            for index in 0..<16 {
                #expect(kinds[index] == (index.isMultiple(of: 2) ? "writer" : "file"), "task \(index)")
            }
            // And on this thread, after an engine's build: written to a file again.
            manager(ValueTransport(acceptsBodyWriters: true)).send(form)
            let value = try APIHTTPRequest(form.makeURLRequest())
            guard case .file = value.body else {
                Issue.record("a form built by hand after the engine's build is a file, not \(value.body)")
                return
            }
        }
    }

    @Test func identicalSharedRequestsReachTheTransportAsOneValue() throws {
        let transport = ValueTransport(holds: true)
        let manager = manager(transport)
        let first = manager.send(SeamRequest(path: "/shared", sharing: .always))
        let second = manager.send(SeamRequest(path: "/shared", sharing: .always))
        #expect(transport.records.count == 1)
        #expect(transport.records.first?.request.url.path == "/shared")
        transport.release()
        #expect(first.state.name == "finished" && second.state.name == "finished")
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func persistedHeadersReachTheValueAsCredentials(scope: String?) throws {
        let first = APIRawResponse(statusCode: 200, headers: ["access-token": "t1"], body: Data("ok".utf8))
        let transport = ValueTransport(answers: [.success(first), .success(ValueTransport.ok)])
        let manager = manager(transport, persistedHeaders: APIAuthentication.PersistedHeaders())
        manager.send(SeamRequest(concurrencyScope: scope))
        manager.send(SeamRequest(concurrencyScope: scope))
        let second = try #require(transport.records.last)
        #expect(transport.records.count == 2)
        #expect(second.request.value(forHeaderField: "Access-Token") == "t1")
        #expect(
            second.options.sensitiveHeaders.contains { $0.caseInsensitiveCompare("access-token") == .orderedSame },
            "a persisted header is a credential: dropped on a redirect to another origin")
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func aStoredCopyIsRevalidatedWithItsValidatorInTheValue(scope: String?) throws {
        let stored = APIRawResponse(
            statusCode: 200, headers: ["ETag": "\"abc\"", "Cache-Control": "max-age=0"], body: Data("ok".utf8))
        let transport = ValueTransport(answers: [.success(stored)])
        let manager = manager(transport, cache: APIResponseCache(disk: nil))
        manager.send(SeamRequest(concurrencyScope: scope, cacheOption: .both))
        manager.send(SeamRequest(concurrencyScope: scope, cacheOption: .both))
        #expect(transport.records.count == 2)
        #expect(transport.records.first?.request.value(forHeaderField: "If-None-Match") == nil)
        #expect(transport.records.last?.request.value(forHeaderField: "if-none-match") == "\"abc\"")
    }

    /// Cancelled while the transport has it, from another thread, or while its retry waits: the
    /// handle the transport gave is cancelled once, and a retry hands over a new value.
    @Test(arguments: [nil, "cart"] as [String?])
    func aCancelledTaskCancelsTheHandleItsTransportGave(scope: String?) throws {
        let running = ValueTransport(holds: true)
        let first = manager(running)
        let task = first.send(SeamRequest(concurrencyScope: scope))
        DispatchQueue.global().sync { task.cancel() }
        #expect(task.state.name == "cancelled(explicit)")
        #expect(running.cancelCount == 1)

        let clock = TestClock()
        let failing = ValueTransport(answers: [.failure(URLError(.networkConnectionLost)), .success(ValueTransport.ok)])
        let second = manager(failing, clock: clock)
        let retrying = second.send(
            SeamRequest(
                concurrencyScope: scope, retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        #expect(retrying.state.name == "waitingForRetry")
        retrying.cancel()
        clock.advance(by: 5)
        #expect(retrying.state.name == "cancelled(explicit)")
        #expect(failing.records.count == 1, "nothing is sent after the cancellation")

        let retried = ValueTransport(answers: [.failure(URLError(.networkConnectionLost)), .success(ValueTransport.ok)])
        let clock2 = TestClock()
        let third = manager(retried, clock: clock2)
        let task2 = third.send(
            SeamRequest(
                headers: ["X-Trace": "1"], concurrencyScope: scope,
                retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none)))
        clock2.advance(by: 1)
        #expect(task2.state.name == "finished")
        #expect(retried.records.map { $0.request.value(forHeaderField: "X-Trace") } == ["1", "1"])
        withExtendedLifetime((first, second, third)) {}
    }

    // MARK: Transports written for URLRequest

    /// Implements only the `URLRequest` method of the protocol as it was before `APIHTTPRequest`.
    final class URLRequestTransport: APITransport, @unchecked Sendable {
        // @unchecked: `sent` is only touched under `lock`.
        private let lock = NSLock()
        private var sent: [URLRequest] = []
        var requests: [URLRequest] { lock.withLock { sent } }

        func send(
            _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            lock.withLock { sent.append(request) }
            completion(.success(APIRawResponse(statusCode: 200, headers: [:], body: Data())))
            return NamedHandle()
        }
    }

    @Test(arguments: [nil, "cart"] as [String?])
    func aTransportWrittenForURLRequestStillGetsEveryRequest(scope: String?) throws {
        let transport = URLRequestTransport()
        let task = manager(transport).send(
            SeamRequest(
                method: .post, parameters: ["name": "Tea"], headers: ["X-Trace": "abc"], timeout: 12,
                concurrencyScope: scope))
        #expect(task.state.name == "finished")
        let request = try #require(transport.requests.first)
        #expect(request.httpMethod == "POST")
        #expect(request.url?.absoluteString == "https://api.test/items")
        #expect(request.value(forHTTPHeaderField: "X-Trace") == "abc")
        #expect(request.timeoutInterval == 12)
        #expect(
            request.httpBody.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: String] } == [
                "name": "Tea"
            ])
    }

    @Test func aTransportWrittenForURLRequestAndOptionsGetsTheOptionsAndTheFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("seam-\(UUID().uuidString).bin")
        try Data("file body".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = HeldSinkTransport()  // written for send(_: URLRequest, options:completion:)
        let engine = APIEngine(transport: transport, clock: TestClock(), delivery: .inline, execution: .inline)
        SeamManager(engine: engine).send(SeamRequest(method: .put, body: .file(file), totalTimeout: 9))
        let options = try #require(transport.options)
        #expect(options.bodyFile == file)
        #expect(options.totalTimeout == 9)
    }

    /// Implements no `send` at all: it compiles (every method has a default), and its tasks fail.
    struct SilentTransport: APITransport {}

    @Test func aTransportThatImplementsNoSendFailsItsTasksWithAClearError() throws {
        let task = manager(SilentTransport()).send(SeamRequest())
        guard case .failed(.invalidRequest(let reason, _)) = task.state else {
            Issue.record("expected an invalid request, got \(task.state.name)")
            return
        }
        #expect(reason.contains("SilentTransport") && reason.contains("APIHTTPRequest"))
    }

    @Test func aTransportCanBeCalledFromManyThreadsAtOnce() async throws {
        let transport = ValueTransport()
        let manager = manager(transport, execution: .shared)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask { _ = try? await manager.response(for: SeamRequest(path: "/items/\(index)")) }
            }
        }
        #expect(Set(transport.records.map(\.request.url.path)) == Set((0..<40).map { "/items/\($0)" }))
    }

    // MARK: The value itself

    @Test func aValueMadeFromAURLRequestGivesThatRequestBackUntilItChanges() throws {
        var source = URLRequest(url: URL(string: "https://api.test/a?b=1")!, timeoutInterval: 7)
        source.httpMethod = "PATCH"
        source.setValue("one", forHTTPHeaderField: "X-One")
        source.httpBody = Data("{}".utf8)
        var request = try APIHTTPRequest(source, totalTimeout: 3)
        #expect(request.method == .patch && request.timeout == 7 && request.totalTimeout == 3)
        #expect(request.urlRequest == source)
        request.setValue("two", forHeaderField: "x-two")
        let rebuilt = request.urlRequest
        #expect(rebuilt.value(forHTTPHeaderField: "X-One") == "one")
        #expect(rebuilt.value(forHTTPHeaderField: "X-Two") == "two")
        #expect(rebuilt.httpMethod == "PATCH" && rebuilt.httpBody == Data("{}".utf8))
        #expect(rebuilt.timeoutInterval == 7 && rebuilt.url == source.url)
    }

    @Test func aCopyIsAValueOfItsOwn() throws {
        var source = URLRequest(url: URL(string: "https://api.test/a")!)
        source.setValue("one", forHTTPHeaderField: "X-One")
        let original = try APIHTTPRequest(source)
        var copy = original
        copy.setValue("two", forHeaderField: "X-One")
        copy.url = URL(string: "https://api.test/b")!
        copy.method = .delete
        copy.body = .data(Data("x".utf8))
        copy.timeout = 5
        #expect(original.value(forHeaderField: "X-One") == "one" && copy.value(forHeaderField: "X-One") == "two")
        #expect(original.url.path == "/a" && copy.url.path == "/b")
        #expect(original.method == .get && copy.method == .delete)
        #expect(original.timeout == source.timeoutInterval && copy.timeout == 5)
        #expect(original.urlRequest == source, "the original still gives back its source")
        #expect(copy.urlRequest.url?.path == "/b" && copy.urlRequest.httpMethod == "DELETE")
        var timed = original
        timed.totalTimeout = 9
        #expect(timed.urlRequest == source, "a total timeout is not part of a URLRequest")
        #expect(original.totalTimeout == nil)
    }

    /// Methods are case-sensitive on the wire (RFC 9110 §9.1) but this library upper-cases every
    /// method it is given, as URLSession does for the standard ones: `patch` is `PATCH`.
    @Test(arguments: [
        ("GET", "GET"), ("get", "GET"), ("PaTcH", "PATCH"), ("M-SEARCH", "M-SEARCH"), ("propfind", "PROPFIND"),
        ("é", "É"), ("", ""),
    ])
    func aMethodIsUpperCasedWhateverItsCase(given: String, expected: String) throws {
        #expect(HTTPMethod(rawValue: given).rawValue == expected)
        var source = URLRequest(url: testBaseURL)
        source.httpMethod = given.isEmpty ? nil : given
        #expect(try APIHTTPRequest(source).method.rawValue == (given.isEmpty ? "GET" : expected))
    }

    @Test func aURLRequestWithoutAURLIsRefusedWithATypedError() {
        var source = URLRequest(url: URL(string: "https://api.test")!)
        source.url = nil
        #expect(throws: APIError.self) { try APIHTTPRequest(source) }
    }

    @Test func headerFieldsAreFoundWhateverTheirCaseAndSetOnce() {
        var request = APIHTTPRequest(
            url: testBaseURL,
            headerFields: [
                .init(name: "Accept", value: "a/b"), .init(name: "X-Tag", value: "1"), .init(name: "x-tag", value: "2"),
            ])
        #expect(request.value(forHeaderField: "ACCEPT") == "a/b")
        #expect(request.value(forHeaderField: "X-TAG") == "1, 2", "fields of one name are joined in order")
        request.setValue("3", forHeaderField: "X-Tag")
        #expect(request.headerFields.map(\.name) == ["Accept", "X-Tag"])
        #expect(request.value(forHeaderField: "x-tag") == "3")
        request.setValue(nil, forHeaderField: "accept")
        #expect(request.value(forHeaderField: "Accept") == nil)
        #expect(request.urlRequest.value(forHTTPHeaderField: "X-Tag") == "3")
        #expect(request.urlRequest.httpMethod == "GET")
    }

    /// The redirect rule on a request value says what it says on a `URLRequest`, case by case
    /// (the cases of `RedirectRuleTests`: another origin, scheme or port; a marked header; a hop that
    /// became a bodyless GET; a POST that keeps its body; cookies from the store).
    struct RedirectCase: Sendable, CustomTestStringConvertible {
        var target: String
        var method = "GET"
        var hasBody = false
        var marked: Set<String> = []
        var testDescription: String { "\(method) \(target) body: \(hasBody) marked: \(marked.sorted())" }
    }

    @Test(arguments: [
        RedirectCase(target: "https://cdn.example.com/items"),
        RedirectCase(target: "http://api.example.com/items"),
        RedirectCase(target: "https://api.example.com:8443/items"),
        RedirectCase(target: "https://api.example.com/v2/items"),
        RedirectCase(target: "https://cdn.example.com/items", marked: ["X-Trace"]),
        RedirectCase(target: "https://api.example.com/done", method: "POST", hasBody: true),
        RedirectCase(target: "https://api.example.com/done", method: "HEAD"),
    ])
    func theRedirectRuleSaysTheSameOfAValueAsOfAURLRequest(_ rule: RedirectCase) throws {
        let (target, method, hasBody, marked) = (rule.target, rule.method, rule.hasBody, rule.marked)
        let origin = URL(string: "https://api.example.com/v1/items")!
        let fields = [
            "Authorization": "Bearer t", "Cookie": "s=1", "X-Session-Id": "9", "X-Api-Key": "k", "X-Trace": "kept",
            "Content-Type": "application/json", "Content-Length": "2", "Content-Language": "en", "Accept": "*/*",
        ]
        var old = URLRequest(url: URL(string: target)!)
        old.httpMethod = method
        if hasBody { old.httpBody = Data("{}".utf8) }
        for (name, value) in fields { old.setValue(value, forHTTPHeaderField: name) }
        var value = try APIHTTPRequest(old)
        value.timeout = old.timeoutInterval  // a change: the rule works on the fields, not the source
        let store = APICookieStore()
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        let options = APITransportOptions(sensitiveHeaders: marked, cookies: store, cookieDate: date)
        let response = APIRawResponse(
            statusCode: 302, headers: ["Set-Cookie": "hop=2; Path=/"], body: Data(), url: origin)
        let expected = options.redirectRequest(old, from: origin, redirectResponse: response).allHTTPHeaderFields ?? [:]
        let store2 = APICookieStore()
        let options2 = APITransportOptions(sensitiveHeaders: marked, cookies: store2, cookieDate: date)
        let next = options2.redirectRequest(value, from: origin, redirectResponse: response)
        var actual: [String: String] = [:]
        for field in next.headerFields { actual[field.name] = field.value }
        #expect(actual == expected)
        #expect(next.url.absoluteString == target)
    }
}
