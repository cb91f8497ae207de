import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite(
    "Integration: responses and errors", .enabled(if: Server.isAvailable, Server.skipReason), .timeLimit(.minutes(2)))
struct ResponseIntegrationTests {
    @Test(arguments: [400, 404, 418, 500, 503])
    func anUnacceptableStatusKeepsStatusHeadersAndBody(status: Int) async {
        let error = await failure { () async throws(APIError) in
            try await Client<Echoed>().response(for: HTTPRequest("status/\(status)"))
        }
        #expect(error?.statusCode == status)
        #expect(error?.response?.value(forHeader: "Server")?.contains("gunicorn") == true)
        #expect(error?.description.hasPrefix("The server answered \(status)") == true)
    }

    @Test func theServersMessageIsExtractedFromAnErrorBody() async {
        var request = HTTPRequest(
            "fixture/error/422", parameters: ["field": "error_description", "text": "quantity must be positive"])
        request.retryPolicy = nil
        let error = await failure { () async throws(APIError) in try await Client<Echoed>().response(for: request) }
        #expect(error?.serverMessage == "quantity must be positive")
        #expect(error?.localizedDescription.hasSuffix(": quantity must be positive") == true)
        #expect(
            error?.responseBody.flatMap { String(data: $0, encoding: .utf8) }?.contains("error_description") == true)
    }

    @Test func aNoContentStatusIsAnEmptyResponse() async throws {
        #expect(try await Client<APIEmptyResponse>().response(for: HTTPRequest("status/204")) == APIEmptyResponse())
    }

    @Test func acceptableStatusCodesArePerRequest() async throws {
        var request = HTTPRequest("status/404")
        request.acceptableStatusCodes = APIStatusCodes(200..<500)
        #expect(try await Client<APIRawResponse>().response(for: request).statusCode == 404)
    }

    @Test func acceptableStatusCodesMayBeIndividualCodes() async throws {
        var request = HTTPRequest("status/409")
        request.acceptableStatusCodes = [200, 409]
        #expect(try await Client<APIRawResponse>().response(for: request).statusCode == 409)
        request.path = "status/410"
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: request)
        }
        #expect(error?.statusCode == 410)
    }

    @Test func aKeyPathDecodesPartOfARealBody() async throws {
        struct UserAgent: APIResponse, Decodable {
            static var keyPath: String? { "headers.User-Agent" }
            let value: String
            init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(String.self) }
        }
        var request = HTTPRequest("get")
        request.headers = ["User-Agent": "APIManagerKit-tests"]
        #expect(try await Client<UserAgent>().response(for: request).value == "APIManagerKit-tests")
    }

    @Test func aBodyThatDoesNotDecodeKeepsItAndItsCodingPath() async {
        struct Wrong: APIResponse, Decodable { let args: [String: Int] }
        let error = await failure { () async throws(APIError) in
            try await Client<Wrong>().response(for: HTTPRequest("get", parameters: ["n": "not a number"]))
        }
        guard case .decoding(_, let response)? = error else {
            Issue.record("expected a decoding error, got \(String(describing: error))")
            return
        }
        #expect(String(data: response.body, encoding: .utf8)?.contains("not a number") == true)
        #expect(error?.description.contains("args.n") == true)
    }

    @Test func aMultiMegabyteDownloadArrivesWhole() async throws {
        let count = 5_000_000
        let raw = try await Client<APIRawResponse>().response(for: HTTPRequest("fixture/bytes/\(count)"))
        #expect(raw.body.count == count)
        #expect(raw.body == Pattern.bytes(count))
    }

    @Test func aMultiMegabyteUploadArrivesWhole() async throws {
        struct Digest: APIResponse, Decodable {
            let length: Int
            let sha256: String
        }
        let bytes = Pattern.bytes(4_000_000)
        var request = HTTPRequest("fixture/digest", method: .post)
        request.body = APIRequestBody(data: bytes, contentType: "application/octet-stream")
        let digest = try await Client<Digest>().response(for: request)
        #expect(digest.length == bytes.count)
        #expect(digest.sha256 == (await SHA256Hex.of(bytes)))
    }
}

/// The fixture's byte pattern (`i % 251`), built by repetition so a debug build makes it quickly.
enum Pattern {
    static func bytes(_ count: Int) -> Data {
        let period = Data((0..<251).map { UInt8($0) })
        var data = Data(capacity: count + 251)
        while data.count < count { data.append(period) }
        return data.prefix(count)
    }
}

/// SHA-256 in hex, by the system's `sha256sum`, to check an upload without a crypto dependency.
/// Awaits the process instead of blocking a thread of the cooperative pool.
enum SHA256Hex {
    static func of(_ data: Data) async -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        guard (try? data.write(to: file)) != nil else { return "write failed" }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sha256sum", file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        return await withCheckedContinuation { continuation in
            process.terminationHandler = { _ in
                let output = String(data: pipe.fileHandleForReading.readDataToEndOfFile(), encoding: .utf8) ?? ""
                continuation.resume(returning: String(output.prefix { $0 != " " }))
            }
            if (try? process.run()) == nil { continuation.resume(returning: "sha256sum failed") }
        }
    }
}

@Suite(
    "Integration: pagination through the Link header", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct PaginationIntegrationTests {
    struct Page: APIResponse, Decodable {
        let page: Int
        let items: [Int]
    }

    func pages(_ first: HTTPRequest) async -> ([APIPage<Page>], APIError?) {
        let client = Client<Page>()
        var pages: [APIPage<Page>] = []
        do {
            for try await page in client.pages(from: first, next: { url, _ in HTTPRequest(absolute: url) }) {
                pages.append(page)
            }
            return (pages, nil)
        } catch {
            return (pages, error)
        }
    }

    @Test func everyPageIsFollowedThroughRelativeLinks() async {
        let (pages, error) = await pages(HTTPRequest("fixture/pages/4"))
        #expect(error == nil)
        #expect(pages.map(\.response.page) == [1, 2, 3, 4])
        #expect(pages.first?.link(relation: "last")?.path == "/fixture/pages/4")
    }

    @Test func aLoopOfLinksStopsWithATypedError() async {
        // The first request's query is written as loop=2&page=1, the server's links as page=1&loop=2.
        let (pages, error) = await pages(
            HTTPRequest("fixture/pages/5", parameters: .query(["loop": "2", "page": "1"])))
        #expect(pages.map(\.response.page) == [1, 2])
        guard case .rejected(let underlying, _)? = error, case .loop(let url)? = underlying as? APIPaginationError
        else {
            Issue.record("expected a loop error, got \(String(describing: error))")
            return
        }
        #expect(url.query == "page=1&loop=2")
    }
}

@Suite(
    "Integration: lenient mapping of a real body", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)))
struct LenientMappingIntegrationTests {
    /// httpbin echoes query values as strings: mapped leniently into typed values.
    struct Echo: APIResponse, APIMappable {
        let count: Int
        let flag: Bool
        let price: Double
        let missing: Int?
        let url: URL
        init(map: APIMap) throws(APIMappingError) {
            count = try map.value("args.count")
            flag = try map.value("args.flag")
            price = try map.value("args.price")
            missing = try map.value("args.missing")
            url = try map.value("url")
        }
    }

    @Test func stringsFromTheServerBecomeTypedValues() async throws {
        let request = HTTPRequest("anything", parameters: .query(["count": "3", "flag": "1", "price": "9.5"]))
        let echo = try await Client<Echo>().response(for: request)
        #expect(echo.count == 3 && echo.flag && echo.price == 9.5 && echo.missing == nil)
        #expect(echo.url.path == "/anything")
    }

    @Test func aValueThatDoesNotConvertIsADecodingErrorNamingItsKeyPath() async throws {
        let request = HTTPRequest("anything", parameters: .query(["count": "many", "flag": "1", "price": "1"]))
        let error = await failure { () async throws(APIError) in try await Client<Echo>().response(for: request) }
        guard case .decoding(let underlying as APIMappingError, let response)? = error else {
            Issue.record("expected a decoding error, got \(String(describing: error))")
            return
        }
        #expect(underlying.keyPath == "args.count")
        #expect(underlying.found == #"the string "many""#)
        #expect(response.statusCode == 200)
    }
}
