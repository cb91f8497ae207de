import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Against the real server: what a hostile caller or a broken server does.
@Suite(
    "Integration: hostile input and broken servers", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct HostileInputIntegrationTests {
    @Test func aHeaderNameWithCRLFFailsTheTaskInsteadOfInjectingHeaderLines() async {
        var request = HTTPRequest("headers")
        request.headers = ["X-Probe\r\nX-Injected: yes\r\nX-Other": "1"]
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        guard case .invalidRequest(let reason, _)? = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("not a valid HTTP field name"))
    }

    @Test func aHeaderValueWithCRLFFailsTheTaskInsteadOfGoingOutWithoutIt() async throws {
        var request = HTTPRequest("headers")
        request.headers = ["X-Probe": "a\r\nX-Injected: yes"]
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error.map(describeKind) == "invalidRequest")
        request.headers = ["X-Probe": "plain"]
        let echoed = try await Client<Echoed>().response(for: request)
        #expect(echoed.header("X-Probe") == "plain")
        #expect(echoed.header("X-Injected") == nil)
    }

    @Test(
        arguments: [
            ("anything/api/v1/users/{id}/items", ["id": ".."]), ("anything/{a}/{b}/admin", ["a": "..", "b": ".."]),
            ("anything/users/{id}/items", ["id": "."]),
        ] as [(String, [String: String])])
    func dotSegmentsInPathValuesNeverReachTheServer(path: String, values: [String: String]) async {
        let request = HTTPRequest(path, parameters: .path(values.mapValues { APIValue.string($0) }))
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error.map(describeKind) == "invalidRequest")
    }

    @Test func aPathValueWithSlashesStaysOneSegmentOnTheServer() async throws {
        let request = HTTPRequest("anything/users/{id}/items", parameters: .path(["id": "../admin"]))
        let echoed = try await Client<Echoed>().response(for: request)
        // The server decodes %2F when it echoes the URL; what matters is that nothing was removed:
        // a traversal would have reached /anything/admin/items.
        #expect(echoed.url?.hasSuffix("/anything/users/../admin/items") == true, "\(echoed.url ?? "")")
    }

    @Test(arguments: ["", "?schemes=many"])
    func a401WithABasicChallengeKeepsItsBody(query: String) async {
        var request = HTTPRequest("fixture/basic-401")
        request.url = URL(string: Server.url.absoluteString + "/fixture/basic-401" + query) ?? Server.url
        request.path = ""
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error?.statusCode == 401)
        #expect(error?.serverMessage == "who are you")
        #expect(String(data: error?.responseBody ?? Data(), encoding: .utf8) == #"{"message": "who are you"}"#)
    }

    @Test func a401ToABasicAuthorizationKeepsItsBody() async {
        var request = HTTPRequest("fixture/basic-401")
        request.authorization = .basic(username: "ada", password: "wrong")
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error?.statusCode == 401)
        #expect(error?.serverMessage == "who are you")
    }

    @Test func aGzipBombIsStoppedAtTheBodyLimit() async {
        var request = HTTPRequest("fixture/gzip-bomb")
        request.maxBodySize = 1 << 20
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        guard case .responseTooLarge(let limit)? = error else {
            Issue.record("expected responseTooLarge, got \(String(describing: error))")
            return
        }
        #expect(limit == 1 << 20)
    }

    /// A 256 MiB gzip bomb refused at a 1 MiB limit: the process's peak memory grows by far less
    /// than the inflated size (a bound with room for the tests running beside this one).
    @Test(.enabled(if: !runsUnderThreadSanitizer, "shadow memory makes the figure meaningless"))
    func refusingACompressedBodyKeepsMemoryNearTheLimit() async {
        let before = peakResidentBytes()
        var request = HTTPRequest("fixture/gzip-bomb", parameters: .query(["mib": "256"]))
        request.maxBodySize = 1 << 20
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>(transport: TransportUnderTest.make()).response(for: request)
        }
        #expect(error.map(describeKind) == "responseTooLarge")
        let growth = peakResidentBytes() - before
        if TransportUnderTest.boundsCompressedBodyMemory {
            #expect(growth < 128 << 20, "peak memory grew by \(growth >> 20) MiB")
        } else {
            withKnownIssue("FoundationNetworking inflates the whole body before the transport can stop it") {
                #expect(growth < 128 << 20, "peak memory grew by \(growth >> 20) MiB")
            }
        }
    }

    /// A server sends a second response nobody asked for after the first one's `Content-Length`,
    /// on a kept-alive connection. Those bytes must never become the answer to a later request: the
    /// connection is closed instead of reused.
    @Test func bytesPastTheContentLengthNeverAnswerTheNextRequest() async throws {
        let client = Client<APIRawResponse>(transport: TransportUnderTest.make())
        func body(_ path: String) async throws -> String {
            let url = try #require(URL(string: path, relativeTo: Server.rawURL)?.absoluteURL)
            return String(decoding: try await client.response(for: HTTPRequest(absolute: url)).body, as: UTF8.self)
        }
        let token = UUID().uuidString
        #expect(try await body("/overlong?delay=0.05&token=\(token)") == "first")
        // The extra bytes must arrive while the connection is idle, before the next request: the
        // server sends them 50 ms after the answer, and a loaded machine ran its thread more than
        // 300 ms late (CI, 2026-11-27), so the test waits until the server says they went out (asked
        // on a connection of another transport, not the one under test), then gives the client's
        // event loop a moment to read them.
        let watcher = Client<APIRawResponse>(transport: URLSessionTransport())
        let sentURL = try #require(URL(string: "/sent?token=\(token)", relativeTo: Server.rawURL)?.absoluteURL)
        let sent = try await watcher.response(for: HTTPRequest(absolute: sentURL)).body
        #expect(String(decoding: sent, as: UTF8.self) == "sent")
        try await Task.sleep(for: .milliseconds(100))
        var answers: [String] = []
        for index in 0..<3 { answers.append(try await body("/plain\(index)")) }
        let expected = ["real /plain0", "real /plain1", "real /plain2"]
        if TransportUnderTest.refusesDesynchronizedConnections {
            #expect(answers == expected)
        } else {
            // Intermittent: libcurl reuses the connection only when the extra bytes came in time.
            withKnownIssue(
                "libcurl reuses the connection and reads the extra bytes as the next answer", isIntermittent: true
            ) {
                #expect(answers == expected)
            }
        }
    }

    @Test func aDeclaredLengthPastTheLimitStopsBeforeTheBody() async throws {
        // The server sends the head at once and the body only 8 s later: the answer must not wait.
        // (The margin is for a machine busy with other builds: FoundationNetworking's delegate
        // queue has been seen to hand nothing over for seconds there.)
        var request = HTTPRequest("fixture/bytes/300000", parameters: .query(["stall": "8"]))
        request.maxBodySize = 100_000
        let started = Date()
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        #expect(error.map(describeKind) == "responseTooLarge")
        #expect(Date().timeIntervalSince(started) < 6)
        request = HTTPRequest("fixture/bytes/300000")
        request.maxBodySize = 300_000
        #expect(try await Client<APIRawResponse>().response(for: request).body.count == 300_000)
    }

    @Test func aHeadRequestIsNotRefusedForTheLengthItsAnswerAnnounces() async throws {
        // A HEAD's answer has no body, whatever its Content-Length says (RFC 9110 §9.3.2).
        var request = HTTPRequest("fixture/bytes/300000", method: .head)
        request.maxBodySize = 100_000
        let response = try await Client<APIRawResponse>().response(for: request)
        #expect(response.statusCode == 200)
        #expect(response.value(forHeader: "Content-Length") == "300000")
        #expect(response.body.isEmpty)
    }

    @Test func aBodyWithinTheDefaultLimitArrivesWhole() async throws {
        let body = try await Client<APIRawResponse>().response(for: HTTPRequest("fixture/bytes/2000000")).body
        #expect(body.count == 2_000_000)
        #expect(body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) })
    }

    @Test func aConnectionClosedMidBodyIsALostConnectionAndAGetIsRetried() async throws {
        let key = UUID().uuidString
        var once = HTTPRequest("fixture/truncated/\(key)")
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: once)
        }
        guard case .transport(let underlying as URLError)? = error else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(underlying.code == .networkConnectionLost)

        once = HTTPRequest("fixture/truncated/\(key)-retried")
        once.retryPolicy = APIRetryPolicy(maxAttempts: 2, baseDelay: 0.05, jitter: .none)
        struct Attempts: APIResponse, Decodable { let attempts: Int }
        #expect(try await Client<Attempts>().response(for: once).attempts == 2)
    }

    @Test func aHeaderRedactedAsASecretIsAlsoDroppedOnARedirectToAnotherOrigin() async throws {
        let target = Server.secondURL.appendingPathComponent("headers").absoluteString
        var request = HTTPRequest("redirect-to", parameters: ["url": .string(target)])
        request.headers = ["X-Auth-Token": "t0ken", "X-Session-Id": "s1", "X-Trace": "kept"]
        let curl = try request.cURLDescription()
        #expect(curl.contains("X-Auth-Token: ***") && curl.contains("X-Session-Id: ***"))
        let echoed = try await Client<Echoed>().response(for: request)
        #expect(echoed.header("X-Auth-Token") == nil)
        #expect(echoed.header("X-Session-Id") == nil)
        #expect(echoed.header("X-Trace") == "kept")
        // Within the origin the header is kept.
        var same = HTTPRequest("redirect-to", parameters: ["url": "/headers"])
        same.headers = ["X-Auth-Token": "t0ken"]
        #expect(try await Client<Echoed>().response(for: same).header("X-Auth-Token") == "t0ken")
    }

    @Test func theSessionNeverAddsCookiesBehindTheEngine() async throws {
        // httpbin sets the cookie and redirects to /cookies, which echoes what it was sent.
        struct Cookies: APIResponse, Decodable { let cookies: [String: String] }
        let client = Client<Cookies>()
        _ = try? await client.response(for: HTTPRequest("cookies/set", parameters: ["session": "abc"]))
        let sent = try await client.response(for: HTTPRequest("cookies"))
        #expect(sent.cookies.isEmpty, "\(sent.cookies)")
    }

    /// With a cookie store, the cookie httpbin sets on its redirect reaches the redirect's target
    /// (the transport stores it at the hop) and every later request to the host.
    @Test func aCookieStoreCarriesTheCookieARedirectSet() async throws {
        struct Cookies: APIResponse, Decodable { let cookies: [String: String] }
        let store = APICookieStore()
        let client = Client<Cookies>(transport: TransportUnderTest.make(), cookies: store)
        let redirected = try await client.response(for: HTTPRequest("cookies/set", parameters: ["session": "abc"]))
        #expect(redirected.cookies == ["session": "abc"])
        let later = try await client.response(for: HTTPRequest("cookies"))
        #expect(later.cookies == ["session": "abc"])
        #expect(store.allCookies.map(\.name) == ["session"])
        // Deleted by the server: an expired Set-Cookie removes it.
        _ = try? await client.response(for: HTTPRequest("cookies/delete", parameters: ["session": ""]))
        #expect(store.allCookies.isEmpty)
        #expect(try await client.response(for: HTTPRequest("cookies")).cookies.isEmpty)
    }

    /// One `Set-Cookie` field is one cookie, commas and all, on a response and on a redirect hop
    /// (the corrections issue, item 12: `foo=bar; b,az=qux` made a cookie `az`).
    @Test(arguments: [false, true])
    func eachSetCookieFieldIsOneCookie(onARedirect: Bool) async throws {
        struct Cookies: APIResponse, Decodable { let cookies: [String: String] }
        let store = APICookieStore()
        let client = Client<APIRawResponse>(transport: TransportUnderTest.make(), cookies: store)
        _ = try await client.response(
            for: HTTPRequest("fixture/set-cookies", parameters: onARedirect ? ["redirect": "1"] : [:]))
        #expect(store.allCookies.map(\.name).sorted() == ["foo", "plain", "quoted"])
        #expect(store.allCookies.first { $0.name == "quoted" }?.value == #""bar, baz=qux""#)
        let sent = try await Client<Cookies>(transport: TransportUnderTest.make(), cookies: store).response(
            for: HTTPRequest("cookies"))
        #expect(Set(sent.cookies.keys) == ["foo", "plain", "quoted"])
    }
}

/// The case name of an error, for comparisons.
func describeKind(_ error: APIError) -> String {
    switch error {
    case .cancelled: return "cancelled"
    case .ignored: return "ignored"
    case .timedOut: return "timedOut"
    case .transport: return "transport"
    case .invalidRequest: return "invalidRequest"
    case .unacceptableStatus: return "unacceptableStatus"
    case .decoding: return "decoding"
    case .rejected: return "rejected"
    case .responseTooLarge: return "responseTooLarge"
    case .authenticationFailed: return "authenticationFailed"
    case .lineFull(let maxLength): return "lineFull(\(maxLength))"
    case .waitedTooLong(let maxWait): return "waitedTooLong(\(maxWait))"
    case .circuitOpen(let origin, let closesIn): return "circuitOpen(\(origin), \(closesIn))"
    case .durableStore: return "durableStore"
    }
}
