import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Integration: transport", .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(2)))
struct TransportIntegrationTests {
    @Test func cancellingATaskCancelsTheRequestAndEndsAsCancelled() async throws {
        let transport = TransportUnderTest.make()
        let client = Client<Echoed>(transport: transport)
        let started = Date()
        let task = client.send(HTTPRequest("delay/10"))
        try await Task.sleep(for: .milliseconds(300))
        #expect(transport.requestsInFlight == 1)
        task.cancel()
        guard case .failed(.cancelled(.explicit)) = task.state else {
            Issue.record("expected cancelled, got \(task.state)")
            return
        }
        // The transport's request ends too: it lets go of it well before the server answers.
        while transport.requestsInFlight > 0, Date().timeIntervalSince(started) < 6 {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(transport.requestsInFlight == 0)
        #expect(Date().timeIntervalSince(started) < 6)
    }

    @Test func responseHeadersReadFromTheServerAnyCaseAnyThread() async throws {
        let raw = try await Client<APIRawResponse>()
            .response(for: HTTPRequest("response-headers", parameters: ["X-Served-By": "httpbin", "Custom": "a b"]))
        #expect(raw.value(forHeader: "x-served-by") == "httpbin")
        #expect(raw.value(forHeader: "CUSTOM") == "a b")
        #expect(raw.value(forHeader: "X-Absent") == nil)
        let fields = raw.headers
        #expect(fields.keys.contains { $0.lowercased() == "content-type" })
        #expect(fields.first { $0.key.lowercased() == "x-served-by" }?.value == "httpbin")
        // Copies on other threads see the same headers, and the copy compares equal to a stored one.
        let copies = await withTaskGroup(of: [String: String].self) { group in
            for _ in 0..<8 { group.addTask { raw.headers } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(copies.allSatisfy { $0 == fields })
        #expect(raw == APIRawResponse(statusCode: raw.statusCode, headers: fields, body: raw.body, url: raw.url))
    }

    @Test func cancellingAFinishedRequestDoesNothing() async throws {
        let transport = TransportUnderTest.make()
        // Whether the request has ended, and who waits for it: one lock for both, so neither is missed.
        let state = Locked<(ended: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
        let handle = transport.send(URLRequest(url: Server.url.appendingPathComponent("get"))) { _ in
            state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.ended = true
                defer { state.waiter = nil }
                return state.waiter
            }?.resume()
        }
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> Bool in
                if !state.ended { state.waiter = continuation }
                return state.ended
            }
            if ended { continuation.resume() }
        }
        handle.cancel()
        #expect(transport.requestsInFlight == 0)
    }

    @Test func cancellingTheAwaitingSwiftTaskCancelsTheRequest() async throws {
        let client = Client<Echoed>()
        let started = Date()
        let waiting = Task { () async -> APIError? in
            await failure { () async throws(APIError) in try await client.response(for: HTTPRequest("delay/10")) }
        }
        try await Task.sleep(for: .milliseconds(300))
        waiting.cancel()
        let error = await waiting.value
        #expect(error?.isCancellation == true)
        #expect(Date().timeIntervalSince(started) < 6)
    }

    @Test func aSlowServerTimesOutAsATransportTimeout() async {
        var request = HTTPRequest("delay/10")
        request.timeout = 0.5
        let started = Date()
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error?.isTimeout == true)
        #expect((error?.underlyingError as? URLError)?.code == .timedOut)
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func aRefusedConnectionFailsAtOnceAsCannotConnectToHost() async throws {
        // A port on 127.0.0.1 that nothing listens on: bound, then closed, by the OS's choice.
        let port = try closedLoopbackPort()
        var request = HTTPRequest(absolute: try #require(URL(string: "http://127.0.0.1:\(port)/nothing")))
        request.timeout = 20
        let started = Date()
        let error = await failure { () async throws(APIError) in
            try await Client<Echoed>(transport: TransportUnderTest.make()).response(for: request)
        }
        #expect((error?.underlyingError as? URLError)?.code == .cannotConnectToHost)
        // Both transports report it without waiting for a connect timeout.
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func twentyRedirectsAreFollowedToTheEnd() async throws {
        let response = try await Client<APIRawResponse>().response(for: HTTPRequest("redirect/20"))
        #expect(response.statusCode == 200)
        #expect(response.url?.path == "/get")
    }

    @Test func aTwentyFirstRedirectFailsAsTooManyRedirects() async {
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: HTTPRequest("redirect/21"))
        }
        #expect((error?.underlyingError as? URLError)?.code == .httpTooManyRedirects)
    }

    @Test func aSeeOtherAnsweringAPostContinuesAsAGetWithoutTheBody() async throws {
        var request = HTTPRequest(
            "redirect-to", method: .post, parameters: .query(["url": "/get", "status_code": 303]))
        request.body = APIRequestBody(data: Data("payload".utf8), contentType: "text/plain")
        let echoed = try await Client<Echoed>().response(for: request)
        #expect(echoed.url?.hasSuffix("/get") == true)
        #expect(echoed.header("Content-Type") == nil)
    }

    @Test(arguments: ["ftp://127.0.0.1/file", "file:///etc/hostname", "data:text/plain,hello"])
    func aURLThatIsNotHTTPIsRefusedBeforeSending(target: String) async throws {
        let request = HTTPRequest(absolute: try #require(URL(string: target)))
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        #expect((error?.underlyingError as? URLError)?.code == .unsupportedURL)
    }

    @Test func aRedirectToAURLThatIsNotHTTPIsRefused() async {
        let request = HTTPRequest("redirect-to", parameters: .query(["url": "ftp://127.0.0.1/file"]))
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        #expect((error?.underlyingError as? URLError)?.code == .unsupportedURL)
    }

    @Test func aBodyInACodingTheTransportCannotDecodeFailsAsSuch() async {
        // httpbin sends its JSON as it is, labelled with the coding asked for.
        let request = HTTPRequest("response-headers", parameters: .query(["Content-Encoding": "x-unknown"]))
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        #expect((error?.underlyingError as? URLError)?.code == .cannotDecodeContentData)
        #expect(error?.isTimeout == false)
    }

    @Test func anIdentityCodingIsNoCodingAtAll() async throws {
        let request = HTTPRequest("response-headers", parameters: .query(["Content-Encoding": "identity"]))
        let response = try await Client<APIRawResponse>().response(for: request)
        #expect(String(decoding: response.body, as: UTF8.self).contains("\"identity\""))
    }

    @Test func retryAfterDrivesARealRetry() async throws {
        struct Served: APIResponse, Decodable { let attempts: Int }
        var request = HTTPRequest("fixture/retry-after/\(UUID().uuidString)", parameters: ["after": "1"])
        request.retryPolicy = APIRetryPolicy(maxAttempts: 3, baseDelay: 0.01, jitter: .none)
        let client = Client<Served>()
        let delays = Locked<[TimeInterval]>([])
        final class Recorder: APIManagerDelegate, @unchecked Sendable {
            let delays: Locked<[TimeInterval]>
            init(_ delays: Locked<[TimeInterval]>) { self.delays = delays }
            func apiManager(_ manager: any APIManager, task: AnyAPITask, willRetryAfter delay: Double, error: APIError)
            {
                delays.withLock { $0.append(delay) }
            }
        }
        let recorder = Recorder(delays)
        client.delegate = recorder
        let started = Date()
        let served = try await client.response(for: request)
        #expect(served.attempts == 2)
        #expect(delays.withLock { $0 } == [1])
        #expect(Date().timeIntervalSince(started) >= 1)
    }

    @Test func connectionsAreReused() async throws {
        struct Connection: APIResponse, Decodable { let port: Int }
        let client = Client<Connection>(transport: TransportUnderTest.make())
        var ports: Set<Int> = []
        for _ in 0..<5 { ports.insert(try await client.response(for: HTTPRequest("fixture/connection")).port) }
        #expect(ports.count == 1)
    }

    @Test func theTransportKeepsNothingAfterRequestsEnd() async throws {
        let transport = TransportUnderTest.make()
        let client = Client<APIRawResponse>(transport: transport)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask { _ = try await client.response(for: HTTPRequest("anything/\(index)")) }
            }
            try await group.waitForAll()
        }
        #expect(transport.requestsInFlight == 0)
        #expect(client.engine.inFlightCount == 0)
    }

    @Test func theEventMonitorTimesRealAttempts() async throws {
        let client = Client<Echoed>()
        let events = Locked<[APIEvent]>([])
        client.engine.eventMonitor = { event in events.withLock { $0.append(event) } }
        _ = try await client.response(for: HTTPRequest("delay/0.2"))
        let seen = events.withLock { $0 }
        #expect(seen.count == 2)
        #expect((seen.last?.duration ?? 0) >= 0.2)
        #expect(seen.last?.description.hasPrefix("← 200 GET \(Server.url.absoluteString)/delay/0.2 in ") == true)
    }
}

/// A value behind a lock, for tests.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&value) }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago and that nothing listens on now.
func closedLoopbackPort() throws -> UInt16 {
    #if canImport(Glibc)
    let stream = Int32(SOCK_STREAM.rawValue)
    #else
    let stream = SOCK_STREAM
    #endif
    let socketDescriptor = socket(AF_INET, stream, 0)
    guard socketDescriptor >= 0 else { throw POSIXError(.EBADF) }
    defer { close(socketDescriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(socketDescriptor, socketAddress, length) == 0
                && getsockname(socketDescriptor, socketAddress, &length) == 0
        }
    }
    guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
    return UInt16(bigEndian: address.sin_port)
}
