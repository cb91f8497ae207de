// A base URL on the engine's configuration (issue 43, item 4): a request gives its path, the engine
// joins it to the base URL; an absolute `url` wins; a relative request without a base URL fails
// with an error that names the setting.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A product page: only its path (no `url`), a template filled from its parameters.
private struct ProductRequest: APIRequest {
    let id: Int
    var cacheOption: APIResponseCache.Option = .networkOnly
    var path: String { "products/{id}" }
    var parameters: APIParameters { .path(["id": .int(id)]) + .query(["currency": "EUR"]) }
}

/// A request that gives an absolute URL of its own.
private struct Status: APIRequest {
    let url = URL(string: "https://status.example.org/health")!
}

private final class ProductAPI: APIManager {
    typealias Request = ProductRequest
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

private final class StatusAPI: APIManager {
    typealias Request = Status
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

private func engine(base: URL?, transport: MockTransport, cache: APIResponseCache? = nil) -> APIEngine {
    var configuration = APIEngine.Configuration()
    configuration.baseURL = base
    configuration.transport = transport
    configuration.clock = TestClock()
    configuration.delivery = .inline
    configuration.execution = .inline
    configuration.cache = cache
    return APIEngine(configuration: configuration)
}

@Suite("A base URL on the engine", .timeLimit(.minutes(1)))
struct BaseURLTests {
    // MARK: The join rule

    /// Every pair of a base with or without its trailing slash and a path with or without its
    /// leading one gives the same URL: the base's path is kept.
    @Test(
        arguments: [
            "https://api.example.com/v1", "https://api.example.com/v1/", "https://api.example.com/v1//",
        ], ["products/2", "/products/2", "./products/2"])
    func theBasesPathIsKeptWhateverTheSlashesOnEitherSide(base: String, path: String) throws {
        let joined = try BaseURL.join(try #require(URL(string: path)), to: try #require(URL(string: base)))
        #expect(joined.absoluteString == "https://api.example.com/v1/products/2")
    }

    @Test(
        arguments: [
            ("https://api.example.com", "/", "https://api.example.com"),
            ("https://api.example.com", "items", "https://api.example.com/items"),
            ("https://api.example.com/", "items", "https://api.example.com/items"),
            ("https://api.example.com:8443/v1/", "items?page=2", "https://api.example.com:8443/v1/items?page=2"),
            ("https://api.example.com/v1?key=k", "items?page=2", "https://api.example.com/v1/items?key=k&page=2"),
            ("https://api.example.com/v1/", "/", "https://api.example.com/v1/"),
            ("https://api.example.com/v1#top", "items", "https://api.example.com/v1/items"),
            ("http://a/b/c/d;p?q", "//g", "http://g"),  // RFC 3986, 5.4.1: a network-path reference
            ("https://api.example.com/v1", "caf%C3%A9/1", "https://api.example.com/v1/caf%C3%A9/1"),
        ])
    func joins(base: String, path: String, expected: String) throws {
        let joined = try BaseURL.join(try #require(URL(string: path)), to: try #require(URL(string: base)))
        #expect(joined.absoluteString == expected)
    }

    @Test(arguments: ["/v1", "file:///tmp/api", "mailto:api@example.com", "https:"])
    func aBaseThatIsNotAnAbsoluteHTTPURLIsRefusedByName(base: String) throws {
        #expect {
            try BaseURL.join(try #require(URL(string: "items")), to: try #require(URL(string: base)))
        } throws: { error in
            guard case .invalidRequest(let reason, _) = error as? APIError else { return false }
            return reason.contains("APIEngine.Configuration.baseURL")
        }
    }

    // MARK: Through the engine

    @Test(arguments: ["https://shop.example.com/api/v2", "https://shop.example.com/api/v2/"])
    func aRequestThatGivesOnlyItsPathGoesToTheBaseURL(base: String) throws {
        let transport = MockTransport()
        transport.stub(.get, "/api/v2/products/7", .json(#"{"value":"seven"}"#))
        let api = ProductAPI(engine: engine(base: URL(string: base), transport: transport))
        let task = api.send(ProductRequest(id: 7))
        #expect(task.state.name == "finished")
        let sent = try #require(transport.requests.first?.url)
        #expect(sent.absoluteString == "https://shop.example.com/api/v2/products/7?currency=EUR")
        #expect(api.engine.baseURL == URL(string: base))
        #expect(api.engine.configuration.baseURL == URL(string: base))
    }

    @Test func anAbsoluteURLWinsOverTheBaseURL() throws {
        let transport = MockTransport()
        transport.stub(.get, "/health", .status(204))
        let api = StatusAPI(engine: engine(base: URL(string: "https://shop.example.com/api"), transport: transport))
        #expect(api.send(Status()).state.name == "finished")
        #expect(transport.requests.first?.url?.absoluteString == "https://status.example.org/health")
    }

    @Test func aRelativeRequestWithoutABaseURLFailsNamingTheSettingAndNothingIsSent() async {
        let transport = MockTransport()
        transport.stub(.get, "/products/7", .json("{}"))
        let api = ProductAPI(engine: engine(base: nil, transport: transport))
        await #expect {
            _ = try await api.response(for: ProductRequest(id: 7))
        } throws: { error in
            guard case .invalidRequest(let reason, _) = error as? APIError else { return false }
            return reason.contains("/products/7") && reason.contains("APIEngine.Configuration.baseURL")
        }
        #expect(transport.records.isEmpty, "a URL without a scheme cannot be sent")
    }

    @Test func aBaseURLThatIsNotHTTPFailsEachRequestWithAnErrorNamingIt() {
        let transport = MockTransport()
        let api = ProductAPI(engine: engine(base: URL(string: "ftp://files.example.com"), transport: transport))
        let task = api.send(ProductRequest(id: 7))
        guard case .failed(.invalidRequest(let reason, _)) = task.state else {
            Issue.record("expected an invalid request, got \(task.state)")
            return
        }
        #expect(reason.contains("ftp://files.example.com"))
        #expect(transport.records.isEmpty)
    }

    @Test func cookiesAndPersistedHeadersGoBackToTheJoinedURLsOrigin() {
        let transport = MockTransport()
        transport.stub(
            .get, "/api/products/7",
            .json("{}", headers: ["Set-Cookie": "cart=abc; Path=/", "client": "c-1"]), .json("{}"))
        var configuration = APIEngine.Configuration()
        configuration.baseURL = URL(string: "https://shop.example.com/api")
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.cookies = APICookieStore()
        configuration.persistedHeaders = APIAuthentication.PersistedHeaders(names: ["client"])
        let api = ProductAPI(engine: APIEngine(configuration: configuration))
        _ = api.send(ProductRequest(id: 7))
        _ = api.send(ProductRequest(id: 7))
        let second = transport.requests.last
        #expect(transport.requests.count == 2)
        #expect(second?.value(forHTTPHeaderField: "Cookie") == "cart=abc")
        #expect(second?.value(forHTTPHeaderField: "client") == "c-1")
    }

    @Test func aJoinedRequestIsCachedAndAnsweredFromTheCache() {
        let transport = MockTransport()
        transport.stub(.get, "/api/products/7", .json(#"{"value":"seven"}"#, headers: ["Cache-Control": "max-age=60"]))
        let api = ProductAPI(
            engine: engine(
                base: URL(string: "https://shop.example.com/api"), transport: transport,
                cache: APIResponseCache(disk: nil)))
        var request = ProductRequest(id: 7)
        request.cacheOption = .fresh(maxAge: 60)
        #expect(api.send(request).responseSource == .network)
        #expect(api.send(request).responseSource == .cache)
        #expect(transport.records.count == 1)
    }
}

@Suite("A relative request without a base URL on URLSession", .timeLimit(.minutes(1)))
struct BaseURLOnURLSessionTests {
    @Test func urlSessionRefusesItAndTheErrorNamesTheSetting() async {
        var configuration = APIEngine.Configuration()
        configuration.transport = URLSessionTransport()
        configuration.delivery = .inline
        let api = ProductAPI(engine: APIEngine(configuration: configuration))
        await #expect {
            _ = try await api.response(for: ProductRequest(id: 7))
        } throws: { error in
            guard case .invalidRequest(let reason, _) = error as? APIError else { return false }
            return reason.contains("APIEngine.Configuration.baseURL")
        }
    }
}
