// The code samples of the library's doc comments, compiled here (Scripts/check-doc-counts.py fails
// when one is not, word for word, line by line whatever the indentation and spacing), and run where
// they can be. The names they take for granted are defined first.
import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(SwiftUI)
import SwiftUI
#endif

enum DocSamples {
    // MARK: What the samples take for granted

    static let appSupport = FileManager.default.temporaryDirectory
    static let applicationSupport = FileManager.default.temporaryDirectory
    static let photoURL = URL(fileURLWithPath: "/tmp/photo.jpg")
    static let keychainStore = APIAuthentication.InMemoryCredentialStore()
    static let access = "access-token"
    static let refresh = "refresh-token"

    struct TokenRefresher: APIAuthentication.Authenticator {
        func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
            credential
        }
    }

    struct CartResponse: APIResponse, Decodable {
        let items: [String]
    }

    struct Export: Sendable {
        let size: Int64 = 3
        func makeInputStream() throws -> InputStream { InputStream(data: Data("abc".utf8)) }
    }

    struct LegacyClient: Sendable {
        func start(
            _ request: URLRequest, completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            completion(.success(APIRawResponse(statusCode: 204, headers: [:], body: Data())))
            return Ignored()
        }
        struct Ignored: APICancellable { func cancel() {} }
    }

    struct IssuesRequest: APIRequest {
        var url = URL(string: "https://api.github.com/repositories/1/issues")!
    }

    struct Issues: APIResponse, Decodable {
        let issues: [String]
    }

    final class IssuesAPI: APIManager {
        typealias Request = IssuesRequest
        typealias Response = Issues
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    struct CompletionRequest: APIRequest {
        let prompt: String
        var url: URL { URL(string: "https://api.example.com/complete")! }
    }

    final class ChatAPI: APIManager {
        typealias Request = CompletionRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static func show(_ issues: [String]) {}

    // MARK: APIAuthentication+SignOut.swift

    static func checkTokenAnswer(status: Int, error: String) throws {
        guard status != 400 || error != "invalid_grant" else {  // the token endpoint's answer
            throw APIAuthentication.CredentialRejected(reason: "the refresh token is no longer valid")
        }
    }

    // MARK: APIAuthentication.swift

    static func makeSession() -> (APIAuthentication, APIEngine) {
        let session = APIAuthentication(authenticator: TokenRefresher(), store: keychainStore)
        let engine = APIEngine(authentication: session)  // one per manager; several may share it
        session.signIn(with: APIAuthentication.Credential(accessToken: access, refreshToken: refresh))
        return (session, engine)
    }

    // MARK: APICookieStore.swift

    static func makeCookieEngine() -> APIEngine {
        let cookies = APICookieStore(fileURL: appSupport.appendingPathComponent("cookies.json"))
        let engine = APIEngine(cookies: cookies)
        return engine
    }

    // MARK: APIEngine+DefaultHeaders.swift

    static func makeHeadersEngine() -> APIEngine {
        var headers = APIEngine.DefaultHeaders.standard
        headers["X-Client"] = "ios"
        headers["User-Agent"] = "Shop/2.1 APIManagerKit/\(APIEngine.DefaultHeaders.packageVersion)"
        headers["Accept-Language"] = nil  // removed
        let engine = APIEngine(defaultHeaders: headers)  // or .none for no header at all
        return engine
    }

    // MARK: APIIdempotencyKey.swift (the request of APIManager.swift's manager)

    struct CartRequest: APIRequest {
        // …
        var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 3, retriesNonIdempotentRequests: true) }
        var idempotencyKey: APIIdempotencyKey? { .standard }
    }

    // MARK: APIManager.swift

    final class CartAPI: APIManager {
        typealias Request = CartRequest
        typealias Response = CartResponse
        let engine = APIEngine()
    }

    // MARK: APIRequest.swift

    struct WeatherRequest: APIRequest {
        let url = URL(string: "https://api.example.com/weather")!
    }

    // MARK: APIResponse.swift

    struct WeatherResponse: APIEnvelopeResponse {
        struct Refused: Error { let message: String }
        let temperature: Double
        init(code: Int, message: String, result: Any?) throws {
            guard code == 0 else { throw Refused(message: message) }  // the task fails: `rejected`
            guard let fields = result as? [String: Any], let temperature = fields["temperature"] as? Double else {
                throw Refused(message: "no temperature")
            }
            self.temperature = temperature
        }
    }

    // MARK: APIEngine+LogObserver.swift

    static func makeLoggedConfiguration() -> APIEngine.Configuration {
        var configuration = APIEngine.Configuration()
        configuration.observers = [APIEngine.LogObserver(minimumLevel: .debug, bodyBytes: 512)]
        // [info] ← 200 GET https://api.example.com/items?token=*** in 42.1 ms, 1832 bytes (task 7, attempt 1, waitUntilDone, scope "cart")
        return configuration
    }

    // MARK: APIEngine+Observer.swift

    struct SlowRequests: APIEngine.Observer {
        func observe(_ observation: APIEngine.Observation) {
            guard case .attemptEnded(let report) = observation.kind, report.transportDuration > 1 else { return }
            print("slow: \(report.method) \(report.redactedURL) took \(report.transportDuration) s")
        }
    }

    // MARK: APIEvent.swift

    static func monitor(_ manager: CartAPI) {
        manager.engine.eventMonitor = { event in print(event) }
        // → GET https://api.example.com/items?page=2 (task 7, attempt 1)
        // ← 200 GET https://api.example.com/items?page=2 in 42.1 ms, 1832 bytes (task 7, attempt 1)
    }

    // MARK: APISecrets.swift

    static func secrets() -> (Bool, String) {
        let secret = APISecrets.isSecret("X-API-Key")  // true
        let shown = APISecrets.redacted(URL(string: "https://u:p@a.test/?api_key=k&page=2")!)
        // "https://***:***@a.test/?api_key=***&page=2"
        return (secret, shown)
    }

    // MARK: APIEngine+DurableStore.swift

    static func makeDurableEngine() -> APIEngine {
        let store = APIEngine.DurableStore(directory: applicationSupport.appendingPathComponent("cart-line"))
        var configuration = APIEngine.Configuration()
        configuration.durableStore = store
        let engine = APIEngine(configuration: configuration)
        return engine
    }

    // MARK: APIFile.swift, APIParameters+BodyEncoding.swift

    struct PhotoUpload: APIRequest {
        let url = URL(string: "https://api.example.com/photos")!
        var method: HTTPMethod { .post }
        var parameters: APIParameters {
            ["caption": "Sunset", "photo": .file(APIFile(url: photoURL))]
        }
        var bodyEncoding: APIParameters.BodyEncoding { .form }
    }

    // MARK: APIClient.Endpoint.swift, APIClient.swift

    enum ClientSamples {
        struct Product: APIResponse, Decodable {
            let name: String
        }

        struct AddToCart: APIClient.Endpoint {
            typealias Response = APIEmptyResponse
            let productID: Int
            let quantity: Int
            var path: String { "cart/items" }
            var method: HTTPMethod { .post }
        }

        struct GetProduct: APIClient.Endpoint {
            typealias Response = Product
            let id: Int
            var path: String { "products/\(id)" }
        }

        static func endpointSample(client: APIClient) async throws -> String {
            struct GetProduct: APIClient.Endpoint {
                typealias Response = Product
                let id: Int
                var path: String { "products/\(id)" }
            }

            let product = try await client.response(for: GetProduct(id: 2))
            return product.name
        }

        static func clientSample() async throws -> String {
            let client = APIClient(baseURL: URL(string: "https://shop.example/api")!)
            let product = try await client.response(for: GetProduct(id: 2))
            client.send(AddToCart(productID: 2, quantity: 1)) { result in print(result) }
            return product.name
        }
    }

    // MARK: APIManager+Sending.swift

    struct ProductRequest: APIRequest {
        let id: Int
        var path: String { "products/\(id)" }
        static func product(id: Int) -> ProductRequest { ProductRequest(id: id) }
    }

    final class ProductAPI: APIManager {
        typealias Request = ProductRequest
        typealias Response = ClientSamples.Product
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    @MainActor final class ProductScreen {
        var product: ClientSamples.Product?
        var failure: APIError?
        let api: ProductAPI
        init(api: ProductAPI) { self.api = api }

        func load() {
            api.send(.product(id: 2)) { result in
                switch result {
                case .success(let product): self.product = product
                case .failure(let error): self.failure = error
                }
            }
        }
    }

    // MARK: APIEngine+Activity.swift (SwiftUI: compiled on Apple platforms, in the workflow's macOS job)

    #if canImport(SwiftUI)
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    struct CartBadge: View {
        let activity: APIEngine.Activity
        var body: some View {
            if activity.durablePending > 0 {
                Text("\(activity.durablePending) edits will be sent when you are back online")
            }
        }
    }
    #endif

    // MARK: MockTransport+Match.swift

    static func stubsThatMatch() -> MockTransport {
        let transport = MockTransport()
        transport.stub(
            MockTransport.Match(.get, "/products/{id}", host: "shop.test", query: .including(["lang": "en"])),
            .json(#"{"id":2,"name":"Kettle"}"#))
        let add = MockTransport.Match(.post, "/cart/items", body: .json(#"{"sku":"A","quantity":1}"#))
        transport.stub(add, times: 1, .status(201))
        return transport
    }

    // MARK: APIMultipartFormData.swift

    static func makeForm() throws -> APIMultipartFormData {
        var form = APIMultipartFormData()
        try form.append("Sunset", name: "caption")
        try form.append(APIFile(url: photoURL), name: "photo")
        return form
    }

    // MARK: APIParameters.swift

    struct Search: APIRequest {
        let query: String
        let url = URL(string: "https://api.example.com/search")!
        var parameters: APIParameters { ["q": .string(query), "page": 2] }
    }

    struct AddToCart: APIRequest {
        let itemID: Int
        let url = URL(string: "https://api.example.com")!
        var path: String { "items/{id}" }
        var method: HTTPMethod { .post }
        var parameters: APIParameters {
            [.path(["id": .int(itemID)]), .query(["notify": true]), .json(["quantity": 3])]
        }
    }

    // MARK: APIRequestBody.swift, APIStatusCodes.swift, APIConcurrencyPolicy+LineLimit.swift

    struct UploadExport: APIRequest {
        let export: Export
        let url = URL(string: "https://api.example.com/exports")!
        var method: HTTPMethod { .put }
        var body: APIRequestBody? {
            .stream(length: export.size) { try export.makeInputStream() }
        }
        var acceptableStatusCodes: APIStatusCodes { .success.union([304, 409]) }  // a range and single codes
        var lineLimit: APIConcurrencyPolicy.LineLimit? { APIConcurrencyPolicy.LineLimit(maxLength: 10, maxWait: 5) }
    }

    // MARK: APIMap.swift

    struct Profile: APIResponse, APIMappable {
        let name: String
        let age: Int?
        let isAdmin: Bool
        let joined: Date
        init(map: APIMap) throws(APIMappingError) {
            name = try map.value("data.user.0.name")
            age = try map.value("data.user.0.age")  // nil when missing or null
            isAdmin = try map.value("data.user.0.admin")  // true, "true", "1" or 1
            joined = try map.value("data.user.0.joined")  // ISO 8601, or seconds or milliseconds since 1970
        }
    }

    // MARK: Lenient.swift

    struct Product: APIResponse, Decodable {
        let name: String
        @Lenient var price: Double  // 9.5 or "9.5"
        @Lenient var inStock: Bool  // true, "true", "1" or 1
        @Lenient var rating: Int?  // missing, null, 4 or "4"
    }

    // MARK: APILink.swift

    static func nextPage(of raw: APIRawResponse) -> URL? {
        // Link: <https://api.github.com/repositories/1/issues?page=2>; rel="next", <…?page=5>; rel="last"
        let next = raw.link(relation: "next")
        return next
    }

    // MARK: APIPages.swift

    static func showIssues(with api: IssuesAPI) async throws {
        for try await page in api.pages(from: IssuesRequest(), next: { url, _ in IssuesRequest(url: url) }) {
            show(page.response.issues)
        }
    }

    // MARK: APIEngine+Configuration.swift

    static let rootPEM = TrustVectors.ecRoot

    /// The recorder's sample: an engine whose attempts are recorded, written to Application Support.
    static func recordSession() throws -> APIEngine.HARRecorder {
        let recorder = APIEngine.HARRecorder()
        var configuration = APIEngine.Configuration()
        configuration.observers = [recorder]
        let engine = APIEngine(configuration: configuration)
        // … use the engine …
        try recorder.write(to: applicationSupport.appendingPathComponent("session.har"))
        _ = engine
        return recorder
    }

    static func replayed(from recording: URL, clock: TestClock) throws -> MockTransport {
        let transport = MockTransport(clock: clock)
        try transport.replay(APIEngine.HAR.read(from: recording), timing: .recorded)
        return transport
    }

    static func growCassette(_ cassette: URL, transport: MockTransport) throws {
        let recording = try APIEngine.HAR.read(from: cassette)
        let newEpisodes = APIEngine.HARRecorder()
        transport.replay(recording, timing: .immediate, sendingMissesWith: URLSessionTransport(), into: newEpisodes)
        // … the test …
        try newEpisodes.write(to: cassette, after: recording)
    }

    static func makeTrustedConfiguration() throws -> APIEngine.Configuration {
        let ourRoot = try APIEngine.Trust.Certificate(pem: rootPEM)
        var trust = APIEngine.Trust()
        trust.hosts["api.bank.example"] = APIEngine.Trust.Rule(
            roots: [ourRoot],
            pins: [
                try APIEngine.Trust.Pin("sha256/lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI="),  // the key in use
                try APIEngine.Trust.Pin("sha256/lmHwjeH5lL4bRHUCwCObVDnbsB9mMXq9oyocfCfZ6ac="),  // the next one
            ])
        var configuration = APIEngine.Configuration()
        configuration.transport = try URLSessionTransport(trust: trust)  // Apple platforms; refused on Linux
        return configuration
    }

    static func showSecurityWarning(for host: String) { warned.withLock { $0.append(host) } }
    static let warned = Locked<[String]>([])

    static func react(to error: APIError) {
        if case .transport(let failure as APIEngine.Trust.Failure) = error, failure.reason == .pinMismatch {
            showSecurityWarning(for: failure.host)
        }
    }

    static func makeConfiguredEngine() -> APIEngine {
        var configuration = APIEngine.Configuration()
        configuration.cache = .shared
        configuration.circuitBreaker = APIEngine.CircuitBreaker()
        let engine = APIEngine(configuration: configuration)
        return engine
    }

    // MARK: APIManager+Streaming.swift

    static func complete(with chat: ChatAPI) async throws -> Data {
        var output = Data()
        for try await chunk in chat.bytes(for: CompletionRequest(prompt: "Hello")) {
            output.append(chunk)
        }
        return output
    }

    // MARK: APITransport.swift

    struct PortedTransport: APITransport {
        let legacyClient = LegacyClient()

        func send(
            _ request: APIHTTPRequest, options: APITransportOptions,
            completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            let urlRequest = request.urlRequest  // or request.method, .url, .headerFields, .body
            return legacyClient.start(urlRequest, completion: completion)  // what the old method did
        }
    }
}

@Suite("The doc comments' samples", .timeLimit(.minutes(1)))
struct DocCommentSamplesTests {
    @Test func theHARSamplesRecordReplayAndGrowACassette() throws {
        let file = DocSamples.applicationSupport.appendingPathComponent("session.har")
        defer { try? FileManager.default.removeItem(at: file) }
        let recorder = try DocSamples.recordSession()
        #expect(try APIEngine.HAR.read(from: file) == recorder.har)
        // A recording with one exchange, replayed after its recorded time on the test's clock.
        let exchange = try #require(URL(string: "https://api.test/ping"))
        let response = APIRawResponse(statusCode: 200, headers: [:], body: Data("{}".utf8), url: exchange)
        recorder.record(URLRequest(url: exchange), result: .success(response), sent: Date(), duration: 0.5)
        try recorder.write(to: file)
        let clock = TestClock()
        let transport = try DocSamples.replayed(from: file, clock: clock)
        let answered = Locked<Int?>(nil)
        _ = transport.send(URLRequest(url: exchange)) { result in
            answered.withLock { $0 = try? result.get().statusCode }
        }
        #expect(answered.withLock { $0 } == nil)
        clock.advance(by: 0.5)
        #expect(answered.withLock { $0 } == 200)
        // Nothing new sent: the cassette is written back as it was.
        try DocSamples.growCassette(file, transport: MockTransport(clock: clock))
        #expect(try APIEngine.HAR.read(from: file).log.entries == recorder.entries)
    }

    @Test func theTrustSampleIsRefusedOnLinuxAndItsFailureSampleWarnsOfAPinMismatch() throws {
        #if canImport(FoundationNetworking)
        let refused = #expect(throws: APIEngine.Trust.Failure.self) { try DocSamples.makeTrustedConfiguration() }
        #expect(refused?.reason == .unsupportedByTransport)
        #else
        #expect(try DocSamples.makeTrustedConfiguration().transport is URLSessionTransport)
        #endif
        DocSamples.react(
            to: .transport(underlying: APIEngine.Trust.Failure(host: "api.bank.example", reason: .pinMismatch)))
        DocSamples.react(to: .transport(underlying: APIEngine.Trust.Failure(host: "other.example", reason: .expired)))
        #expect(DocSamples.warned.withLock { $0 } == ["api.bank.example"])
    }

    @Test func theSamplesThatCanRunDoWhatTheirCommentsSay() throws {
        #expect(throws: APIAuthentication.CredentialRejected.self) {
            try DocSamples.checkTokenAnswer(status: 400, error: "invalid_grant")
        }
        try DocSamples.checkTokenAnswer(status: 500, error: "")
        let (secret, shown) = DocSamples.secrets()
        #expect(secret && shown == "https://***:***@a.test/?api_key=***&page=2")
        #expect(DocSamples.makeHeadersEngine().defaultHeaders["Accept-Language"] == nil)
        #expect(DocSamples.makeSession().0.credential?.accessToken == "access-token")
        #expect(try DocSamples.WeatherResponse(code: 0, message: "", result: ["temperature": 21.5]).temperature == 21.5)
        #expect(throws: DocSamples.WeatherResponse.Refused.self) {
            try DocSamples.WeatherResponse(code: 3, message: "no city", result: nil)
        }
        let codes = DocSamples.UploadExport(export: DocSamples.Export()).acceptableStatusCodes
        #expect(codes.contains(204) && codes.contains(409) && !codes.contains(404))
        #expect(try DocSamples.Search(query: "lamp").makeURLRequest().url?.query?.contains("q=lamp") == true)
        let add = try DocSamples.AddToCart(itemID: 7).makeURLRequest()
        #expect(add.url?.path == "/items/7" && add.url?.query == "notify=true")
        #expect(try DocSamples.makeForm().parts.count == 2)
    }

    @Test func theEndpointSampleGetsItsTypedResponseThroughAClient() async throws {
        let transport = MockTransport()
        transport.stub(.get, "/api/products/2", .json(#"{"name":"Kettle"}"#))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.baseURL = URL(string: "https://shop.example/api")
        let name = try await DocSamples.ClientSamples.endpointSample(client: APIClient(configuration: configuration))
        #expect(name == "Kettle")
    }

    @MainActor @Test func theCompletionSampleSetsTheScreensProductOnTheMainActor() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.get, "/api/products/2", .json(#"{"name":"Kettle"}"#).after(0.2))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.baseURL = URL(string: "https://shop.example/api")
        let screen = DocSamples.ProductScreen(
            api: DocSamples.ProductAPI(engine: APIEngine(configuration: configuration)))
        screen.load()
        #expect(screen.product == nil)
        clock.advance(by: 0.2)
        #expect(screen.product?.name == "Kettle" && screen.failure == nil)
    }

    @Test func theTransportSampleAnswersThroughTheLegacyClient() async throws {
        var configuration = APIEngine.Configuration()
        configuration.transport = DocSamples.PortedTransport()
        configuration.delivery = .inline
        let api = DocSamples.CartAPI()
        _ = api
        let engine = APIEngine(configuration: configuration)
        let chat = DocSamples.ChatAPI(engine: engine)
        #expect(try await chat.response(for: DocSamples.CompletionRequest(prompt: "Hi")).statusCode == 204)
    }
}
