// The samples of the DocC article "Talking HTTP", compiled and checked. Keep the two in step.
import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// MARK: article "Talking HTTP", "Parameters"

struct ItemsRequest: APIRequest {
    let url = URL(string: "https://shop.example.com/api")!
    let path = "stores/{store}/items"
    let store: String
    let query: String

    var parameters: APIParameters {
        ["store": .string(store), "q": .string(query), "page": 2, "tags": ["new", "sale"], "filter": ["min": 10]]
    }
}

struct UpdateCartItem: APIRequest {
    let url = URL(string: "https://shop.example.com/api")!
    let path = "carts/{cart}/items"
    let method: HTTPMethod = .patch
    let cartID: String
    let quantity: Int

    var parameters: APIParameters {
        [.path(["cart": .string(cartID)]), .query(["notify": true]), .json(["quantity": .int(quantity)])]
    }
}

struct SearchRequest: APIRequest, Encodable {
    var url: URL { URL(string: "https://shop.example.com/api/search")! }
    let query: String
    let limit: Int
    let filter: Filter

    struct Filter: Encodable {
        let tags: [String]
        let inStock: Bool
    }
}

enum SigningError: Error { case missingKey }

struct SignedRequest: APIRequest {
    let url = URL(string: "https://api.example.com/orders")!
    let signingKey: String

    func configure(_ urlRequest: inout URLRequest) throws {
        guard !signingKey.isEmpty else { throw SigningError.missingKey }
        urlRequest.setValue("v1:\(signingKey.count)", forHTTPHeaderField: "X-Signature")
    }
}

// MARK: article "Talking HTTP", "Responses"

struct Product: Decodable, Sendable {
    let name: String
    let createdAt: Date
}

struct ProductList: APIResponse, Decodable {
    static var keyPath: String? { "data.items" }
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    let items: [Product]
    init(from decoder: any Decoder) throws {
        items = try [Product](from: decoder)
    }
}

struct PingRequest: APIRequest {
    let url = URL(string: "https://api.example.com/ping")!
}

final class ProblemAPI: APIManager {
    typealias Request = PingRequest
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine = APIEngine()) { self.engine = engine }

    func errorMessage(in response: APIRawResponse) -> String? {
        // RFC 9457 problem details
        let problem = try? JSONDecoder().decode([String: String].self, from: response.body)
        return problem?["detail"] ?? problem?["title"]
    }
}

// MARK: article "Talking HTTP", "Switching over every kind"

func advice(for error: APIError) -> String? {
    switch error {
    case .cancelled, .ignored:
        return nil  // the app asked for it
    case .timedOut, .transport:
        return "Check your connection and try again."
    case .unacceptableStatus(let response, let message):
        return message ?? "The server answered \(response.statusCode)."
    case .decoding, .rejected:
        return "The server's answer could not be read."
    case .invalidRequest(let reason, _):
        return "The request could not be made: \(reason)."
    case .responseTooLarge(let limit):
        return "The answer was larger than \(limit) bytes."
    case .authenticationFailed:
        return "Please sign in again."
    case .lineFull, .waitedTooLong, .circuitOpen(_, _):
        return "The service is busy; try again in a moment."
    case .durableStore:
        return "The change could not be saved on this device."
    @unknown default:
        return error.localizedDescription  // a kind added after this code was written
    }
}

@Suite("Article samples: Talking HTTP", .timeLimit(.minutes(1)))
struct HTTPCodeSamplesTests {
    @Test func theItemsRequestFillsItsTemplateAndQuery() throws {
        let url = try ItemsRequest(store: "lisbon centre", query: "desk lamp").resolvedURL()
        #expect(
            url.absoluteString
                == "https://shop.example.com/api/stores/lisbon%20centre/items?filter%5Bmin%5D=10&page=2&q=desk%20lamp&tags%5B%5D=new&tags%5B%5D=sale"
        )
    }

    @Test func theCartItemUpdatePlacesEachPart() throws {
        let request = try UpdateCartItem(cartID: "c-9", quantity: 3).makeURLRequest()
        #expect(request.url?.absoluteString == "https://shop.example.com/api/carts/c-9/items?notify=true")
        #expect(request.httpMethod == "PATCH")
        #expect(String(data: request.httpBody ?? Data(), encoding: .utf8) == #"{"quantity":3}"#)
    }

    @Test func theSearchRequestIsItsOwnQuery() throws {
        let request = SearchRequest(query: "lamp", limit: 20, filter: .init(tags: ["new"], inStock: true))
        #expect(
            try request.resolvedURL().absoluteString
                == "https://shop.example.com/api/search?filter%5BinStock%5D=true&filter%5Btags%5D%5B%5D=new&limit=20&query=lamp"
        )
    }

    @Test func theSignedRequestSignsOrRefuses() throws {
        #expect(
            try SignedRequest(signingKey: "k3y").makeURLRequest().value(forHTTPHeaderField: "X-Signature") == "v1:3")
        #expect(throws: APIError.self) { try SignedRequest(signingKey: "").makeURLRequest() }
    }

    @Test func thePersistedHeadersSampleUsesAFileStore() throws {
        let credentials = APIAuthentication.FileCredentialStore(
            fileURL: FileManager.default.temporaryDirectory.appendingPathComponent("example-credentials.json"))
        let engine = APIEngine(
            persistedHeaders: APIAuthentication.PersistedHeaders(
                names: ["access-token", "client", "uid"], store: credentials))
        credentials.save(["uid": "ada"], forOrigin: "https://api.example.com:443")
        // sign-out:
        credentials.removeHeaders(forOrigin: "https://api.example.com:443")
        #expect(credentials.headers(forOrigin: "https://api.example.com:443").isEmpty)
        #expect(engine.persistedHeaders?.names == ["access-token", "client", "uid"])
    }

    @Test func theCookieStoreSampleStoresAndSends() throws {
        let cookies = APICookieStore(
            fileURL: FileManager.default.temporaryDirectory.appendingPathComponent("example-cookies.json"))
        let cookieEngine = APIEngine(cookies: cookies)
        defer { cookies.removeAll() }
        cookies.store(setCookie: ["sid=abc; Path=/; Max-Age=60"], from: URL(string: "https://api.example.com/login")!)
        #expect(cookieEngine.cookies?.cookieHeader(for: URL(string: "https://api.example.com/me")!) == "sid=abc")
        #expect(cookies.lastWriteError == nil)
    }

    @Test func theProductListIsDecodedAtItsKeyPath() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(
            nil, "/products", .json(#"{"data": {"items": [{"name": "Lamp", "created_at": "2026-11-21T10:00:00Z"}]}}"#))
        final class Products: APIManager {
            typealias Request = TestRequest
            typealias Response = ProductList
            let engine: APIEngine
            init(engine: APIEngine) { self.engine = engine }
        }
        let list = try await Products(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline)
        )
        .response(for: TestRequest("/products"))
        #expect(list.items.map(\.name) == ["Lamp"])
        #expect(list.items.first?.createdAt == Date(timeIntervalSince1970: 1_795_255_200))
    }

    @Test func theProblemAPIReadsProblemDetails() async {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/ping", .json(#"{"title":"Out of stock","detail":"Lamp is sold out"}"#, status: 409))
        let api = ProblemAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        do {
            _ = try await api.response(for: PingRequest())
            Issue.record("expected a failure")
        } catch {
            #expect(error.serverMessage == "Lamp is sold out")
        }
    }

    @Test func theCURLAndMonitorSamplesRun() throws {
        let curl = try ItemsRequest(store: "lisbon", query: "lamp").cURLDescription()
        #expect(curl.hasPrefix("curl \\\n\t'https://shop.example.com/api/stores/lisbon/items?"))
        var loggedConfiguration = APIEngine.Configuration()
        loggedConfiguration.observers = [APIEngine.LogObserver()]
        #expect(APIEngine(configuration: loggedConfiguration).observers.count == 1)
    }

    @Test func theSwitchOverEveryErrorKindReadsEachPayload() {
        #expect(advice(for: .cancelled(reason: .explicit)) == nil)
        #expect(advice(for: .ignored) == nil)
        #expect(
            advice(for: .unacceptableStatus(APIRawResponse(statusCode: 503), message: nil))
                == "The server answered 503.")
        #expect(advice(for: .unacceptableStatus(APIRawResponse(statusCode: 409), message: "Sold out")) == "Sold out")
        #expect(advice(for: .invalidRequest(reason: "no URL")) == "The request could not be made: no URL.")
        #expect(advice(for: .responseTooLarge(limit: 10)) == "The answer was larger than 10 bytes.")
        #expect(
            advice(for: .circuitOpen(origin: "https://a.example", closesIn: 3))
                == "The service is busy; try again in a moment.")
        #expect(advice(for: .transport(underlying: URLError(.timedOut))) == "Check your connection and try again.")
        #expect(
            advice(for: .durableStore(reason: "the disk is full")) == "The change could not be saved on this device.")
    }
}
