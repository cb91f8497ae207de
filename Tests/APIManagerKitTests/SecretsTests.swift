import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one rule for secrets (`APISecrets`), in every place that prints a request.
@Suite("Secrets in cURL descriptions and events", .timeLimit(.minutes(1)))
struct SecretsTests {
    private func request(_ url: String, method: String = "POST", contentType: String? = nil, body: String? = nil)
        -> URLRequest
    {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        request.httpBody = body.map { Data($0.utf8) }
        return request
    }

    @Test(arguments: [
        "Authorization", "cookie", "X-Auth-Token", "X-API-Key", "x_api_key", "api_key", "access_token",
        "client_secret", "refresh-token", "Password", "user.passwd", "X-Amz-Signature", "key", "sig", "jwt",
        "sessionId", "private_key", "X-Authorization", "authorize_url", "X-Authorisation", "author-auth",
        "oauth_verifier",
    ])
    func theseNamesAreSecret(name: String) {
        #expect(APISecrets.isSecret(name))
    }

    @Test(arguments: [
        "Accept", "page", "q", "sku", "quantity", "Content-Type", "keyword", "monkey", "author", "authors",
        "co_author", "X-Authority",
    ])
    func theseNamesAreNot(name: String) {
        #expect(!APISecrets.isSecret(name))
        #expect(APISecrets.isSecret(name, additionalNames: [name.uppercased()]))
    }

    @Test func queryValuesAndTheUserInfoAreRedactedInTheURL() {
        let url = URL(string: "https://ada:pw@api.test/items?access_token=t0k&page=2&api_key=k3y&q=a%20b#top")!
        let shown = APISecrets.redacted(url)
        #expect(shown == "https://***:***@api.test/items?access_token=***&page=2&api_key=***&q=a%20b#top")
        #expect(APISecrets.redacted(URL(string: "https://api.test/items?page=2")!) == "https://api.test/items?page=2")
        #expect(
            APISecrets.redacted(URL(string: "https://api.test/?tenant=9")!, additionalNames: ["Tenant"])
                == "https://api.test/?tenant=***")
    }

    @Test func formBodyFieldsAreRedacted() {
        let curl = request(
            "https://api.test/login", contentType: "application/x-www-form-urlencoded",
            body: "username=ada&password=hunter2&user%5Bapi_key%5D=k3y&remember=1"
        ).cURLDescription()
        #expect(curl.contains("--data-raw 'username=ada&password=***&user%5Bapi_key%5D=***&remember=1'"))
        #expect(!curl.contains("hunter2") && !curl.contains("k3y"))
    }

    /// The corrections issue, item 16: a multipart field is a field like a form's or a JSON key.
    @Test func multipartFieldsAreRedactedWhateverTheBodyIsShownAs() throws {
        var form = try APIMultipartFormData(boundary: "b0und")
        try form.append("ada", name: "username")
        try form.append("hunter2", name: "password")
        try form.append(APIFile(data: Data("k3y-in-a-file".utf8), fileName: "key.txt"), name: "api_key")
        let text = request("https://api.test/login", contentType: form.contentType, body: "")
        var built = text
        built.httpBody = try form.encoded()
        let curl = built.cURLDescription()
        #expect(!curl.contains("hunter2") && !curl.contains("k3y-in-a-file"), "\(curl)")
        #expect(curl.contains("name=\"password\"\r\n\r\n***\r\n--b0und"))
        #expect(curl.contains("ada"), "a field that is not secret is shown")
        #expect(built.cURLDescription(revealingSecrets: true).contains("hunter2"))
        // A binary part makes the body bytes (printf with octal escapes): the secret is masked there too.
        var binary = try APIMultipartFormData(boundary: "b0und")
        try binary.append("hunter2", name: "password")
        try binary.append(APIFile(data: Data([0, 1, 2, 255]), fileName: "a.bin"), name: "blob")
        built.httpBody = try binary.encoded()
        let bytes = built.cURLDescription()
        #expect(bytes.hasPrefix("printf "))
        let octal = Data("hunter2".utf8).map { String(format: "\\%03o", $0) }.joined()
        #expect(!bytes.contains(octal), "the secret is not in the octal bytes either")
    }

    @Test(
        arguments: [
            ("multipart/form-data; boundary=abc", "abc"), (#"multipart/form-data; boundary="a b:c""#, "a b:c"),
            ("multipart/form-data; charset=utf-8; BOUNDARY=x", "x"), ("multipart/form-data", nil),
        ] as [(String, String?)])
    func theBoundaryIsReadQuotedOrNot(contentType: String, boundary: String?) {
        #expect(APISecrets.multipartBoundary(contentType) == boundary)
    }

    @Test func jsonBodyKeysAreRedactedAtAnyDepth() {
        let curl = request(
            "https://api.test/login", contentType: "application/json",
            body: #"{"user":{"name":"ada","password":"hunter2"},"tokens":[{"id":1}],"apiKey":"k3y"}"#
        ).cURLDescription()
        #expect(!curl.contains("hunter2") && !curl.contains("k3y"))
        #expect(curl.contains(#""password":"***""#) && curl.contains(#""name":"ada""#))
        let plain = request("https://api.test/x", contentType: "application/json", body: #"{"b":1, "a":2}"#)
        #expect(plain.cURLDescription().contains(#"--data-raw '{"b":1, "a":2}'"#))  // nothing to hide: as sent
    }

    @Test func revealingSecretsShowsEverything() {
        let curl = request(
            "https://u:p@api.test/?api_key=k3y", contentType: "application/json", body: #"{"password":"pw"}"#
        ).cURLDescription(revealingSecrets: true)
        #expect(curl.contains("u:p@") && curl.contains("api_key=k3y") && curl.contains(#""password":"pw""#))
    }

    @Test func theEventLineRedactsTheQuery() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items", .json("{}"))
        let api = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let lines = Locked<[String]>([])
        api.engine.eventMonitor = { event in lines.withLock { $0.append(event.description) } }
        var sent = TestRequest("")
        sent.url = URL(string: "https://api.test/items?api_key=k3y&page=2")!
        api.send(sent)
        clock.runUntilIdle()
        let seen = lines.withLock { $0 }
        #expect(seen.count == 2)
        #expect(seen.allSatisfy { $0.contains("api_key=***&page=2") && !$0.contains("k3y") })
    }

    @Test func theEnginesSecretNamesReachEventsAndTheCURLDescription() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/items", .json("{}"))
        let api = TestManager(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        api.engine.secretNames = ["X-Tenant-Pin", "tenant"]
        let events = Locked<[APIEvent]>([])
        api.engine.eventMonitor = { event in events.withLock { $0.append(event) } }
        var sent = TestRequest("")
        sent.url = URL(string: "https://api.test/items?tenant=acme")!
        sent.headers = ["X-Tenant-Pin": "4242"]
        api.send(sent)
        clock.runUntilIdle()
        let first = events.withLock { $0 }.first
        #expect(first?.description.contains("tenant=***") == true)
        let curl = first?.cURLDescription() ?? ""
        #expect(curl.contains("'X-Tenant-Pin: ***'") && !curl.contains("4242") && !curl.contains("acme"))
    }

    @Test func aGETWithABodyKeepsItsMethodAndHEADUsesHead() {
        let get = request("https://api.test/search", method: "GET", body: "{}").cURLDescription()
        #expect(get.contains("-X GET"))
        let head = request("https://api.test/x", method: "HEAD").cURLDescription()
        #expect(head.contains("--head") && !head.contains("-X HEAD"))
        let plain = request("https://api.test/x", method: "GET").cURLDescription()
        #expect(!plain.contains("-X"))
    }

    /// The command runs in a POSIX shell as one command, with `curl` replaced by a function that
    /// writes what it reads, so the bytes that reach curl are checked.
    @Test(.timeLimit(.minutes(1)))
    func aBinaryBodyIsPipedInAndThePastedCommandRuns() throws {
        var bytes = Data([0, 1, 0x23, 0x27, 0x5C, 0x25, 0x0A, 0xFF, 0xFE, 0x80])
        bytes.append(Data("# not a comment".utf8))
        var binary = request("https://api.test/upload", body: nil)
        binary.httpBody = bytes
        binary.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        let command = binary.cURLDescription()
        #expect(command.hasPrefix("printf '"))
        #expect(!command.contains("#"))
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "curl() { cat > \"$OUT\"; echo \"$*\" > \"$OUT.args\"; }\n" + command]
        process.environment = ["OUT": output.path, "PATH": "/usr/bin:/bin"]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try Data(contentsOf: output) == bytes)
        let arguments = try String(contentsOf: output.appendingPathExtension("args"), encoding: .utf8)
        try? FileManager.default.removeItem(at: output.appendingPathExtension("args"))
        #expect(arguments.contains("--data-binary @- https://api.test/upload"))
    }

    @Test func errorAndCacheKeyDescriptionsUseTheSameRule() {
        let url = URL(string: "https://u:pw@api.test/items?access_token=t0k&page=3")!
        let loop = APIPaginationError.loop(url).description
        #expect(loop.contains("access_token=***&page=3") && !loop.contains("t0k") && !loop.contains("pw"))
        let key = APIResponseCache.Key(method: "GET", url: url.absoluteString).description
        #expect(key.contains("access_token=***") && !key.contains("t0k"))
    }

    @Test func theRequestsOwnDescriptionUsesTheSameRule() throws {
        let curl = try BuildRequest(
            url: URL(string: "https://api.test/login?access_token=t0k")!, method: .post,
            parameters: ["password": "hunter2", "name": "ada"]
        ).cURLDescription()
        #expect(!curl.contains("hunter2") && !curl.contains("t0k") && curl.contains("ada"))
    }
}
