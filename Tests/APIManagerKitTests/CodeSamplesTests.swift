// The code samples of README.md and of the DocC articles (Sources/APIManagerKit/APIManagerKit.docc),
// compiled and run. Keep them in step: a sample that changes there changes here.
import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

// MARK: README "Hello, world"

struct Hello: APIRequest {
    let url = URL(string: "https://httpbin.org/get")!
}

struct Greeting: APIResponse, Decodable {
    let url: String
}

final class HelloAPI: APIManager {
    typealias Request = Hello
    typealias Response = Greeting
    let engine = APIEngine()
}

func sayHello() async throws {
    let greeting = try await HelloAPI().response(for: Hello())
    print("GET \(greeting.url) answered")
}

// MARK: README "A first manager", article "Getting started"

struct CartItem: Codable, Sendable, Equatable {
    let sku: String
    let quantity: Int
}

struct CartRequest: APIRequest {
    let url = URL(string: "https://shop.example.com/api")!
    let path = "cart/items"
    var method: HTTPMethod = .post
    var body: APIRequestBody?
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
    var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 3, retriesNonIdempotentRequests: true) }
    var idempotencyKey: APIIdempotencyKey? { .standard }  // one key per add, the same on every retry

    static func add(_ item: CartItem) throws -> CartRequest {
        CartRequest(method: .post, body: try .json(item))
    }
}

struct Cart: APIResponse, Decodable {
    let items: [CartItem]
}

protocol CartAPIDelegate: APIManagerDelegate {
    func cartAPI(_ api: CartAPI, didUpdate cart: Cart)
    func cartAPI(_ api: CartAPI, didFailWith error: APIError)
}

final class CartAPI: APIManager {
    typealias Request = CartRequest
    typealias Response = Cart
    typealias Delegate = any CartAPIDelegate

    let engine: APIEngine
    init(engine: APIEngine = APIEngine()) { self.engine = engine }

    func task(_ task: APITask<CartRequest>, didFinishWith response: Cart) {
        delegate?.cartAPI(self, didUpdate: response)
    }

    func task(_ task: APITask<CartRequest>, didFailWith error: APIError) {
        delegate?.cartAPI(self, didFailWith: error)
    }
}

// MARK: article "Getting started", "A service object with typed callbacks"

struct MeRequest: APIRequest {
    let url = URL(string: "https://shop.example.com/api")!
    var path = "me"
}

struct UserProfile: APIResponse, Decodable {
    let name: String
}

protocol ProfileServiceDelegate: APIManagerDelegate {
    func profileService(_ service: ProfileService, didLoad profile: UserProfile)
    func profileService(_ service: ProfileService, didFailWith error: APIError)
}

final class ProfileService: APIManager {
    typealias Request = MeRequest
    typealias Response = UserProfile
    typealias Delegate = any ProfileServiceDelegate

    let engine: APIEngine
    init(engine: APIEngine = APIEngine()) { self.engine = engine }

    func loadProfile() { send(MeRequest()) }

    func task(_ task: APITask<MeRequest>, didFinishWith response: UserProfile) {
        delegate?.profileService(self, didLoad: response)
    }

    func task(_ task: APITask<MeRequest>, didFailWith error: APIError) {
        delegate?.profileService(self, didFailWith: error)
    }
}

final class ProfileScreen: ProfileServiceDelegate, @unchecked Sendable {
    let service = ProfileService()
    var title = ""

    init() { service.delegate = self }

    func profileService(_ service: ProfileService, didLoad profile: UserProfile) { title = profile.name }
    func profileService(_ service: ProfileService, didFailWith error: APIError) { title = "—" }
}

@Test func theProfileServiceForwardsTypedResultsToItsScreen() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.get, "/api/me", .json(#"{"name":"Ada"}"#), .status(500))
    let screen = ProfileScreen()
    let service = ProfileService(
        engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    service.delegate = screen
    service.loadProfile()
    #expect(screen.title == "Ada")
    service.loadProfile()
    #expect(screen.title == "—")
}

// MARK: article "Getting started", "Envelope responses"

struct WeatherEnvelope: APIEnvelopeResponse {
    let temperature: Double

    init(code: Int, message: String, result: Any?) throws {
        guard code == 0 else { throw APIEnvelopeError("server said \(code): \(message)") }
        guard let result = result as? [String: Any], let temperature = result["temperature"] as? Double else {
            throw APIEnvelopeError("no temperature")
        }
        self.temperature = temperature
    }
}

// MARK: article "Retry and deadlines"

final class PatientAPI: APIManager {
    typealias Request = CartRequest
    typealias Response = Cart
    let engine: APIEngine
    init(engine: APIEngine = APIEngine()) { self.engine = engine }

    /// Two more attempts, one second apart, for anything but a client error.
    func retryDelay(for task: APITask<CartRequest>, afterAttempt attempt: Int, error: APIError) -> TimeInterval? {
        if let status = error.statusCode, (400..<500).contains(status) { return nil }
        return attempt < 3 ? 1 : nil
    }
}

// MARK: article "The delegate and async", "A screen on the main actor" (a module without default isolation)

@MainActor final class CartScreenModel {
    private(set) var cart = Cart(items: [])
    let api: CartAPI

    init(api: CartAPI) {
        self.api = api
        api.delegate = self
    }
}

extension CartScreenModel: @MainActor CartAPIDelegate {
    func cartAPI(_ api: CartAPI, didUpdate cart: Cart) { self.cart = cart }
    func cartAPI(_ api: CartAPI, didFailWith error: APIError) {}
}

@MainActor @Test(.timeLimit(.minutes(1))) func aMainActorScreenHearsItsCartOnTheMainQueue() async throws {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", .json(#"{"items":[{"sku":"A","quantity":1}]}"#))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, execution: .inline))
    let screen = CartScreenModel(api: api)
    api.send(try .add(CartItem(sku: "A", quantity: 1)))
    // The default delivery, the main queue: the event waits behind this test until it yields.
    while screen.cart.items.isEmpty, !Task.isCancelled { await Task.yield() }
    #expect(screen.cart.items == [CartItem(sku: "A", quantity: 1)])
}

// MARK: article "Testing with MockTransport and TestClock"

final class CartScreen: CartAPIDelegate, @unchecked Sendable {
    var carts: [Cart] = []
    func cartAPI(_ api: CartAPI, didUpdate cart: Cart) { carts.append(cart) }
    func cartAPI(_ api: CartAPI, didFailWith error: APIError) {}
}

@Test func cartRequestsRunOneAfterAnotherInOrder() throws {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", MockTransport.Reply.json(#"{"items":[]}"#).after(0.3))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let screen = CartScreen()
    api.delegate = screen

    let add = api.send(try .add(CartItem(sku: "A", quantity: 1)))
    let update = api.send(try .add(CartItem(sku: "A", quantity: 2)))
    #expect(update.state.isTerminal == false)
    #expect(transport.records.count == 1)  // the update waits for the add

    clock.advance(by: 0.3)
    #expect(add.state.isTerminal)
    #expect(transport.records.count == 2)

    clock.advance(by: 0.3)
    #expect(screen.carts.count == 2)
    #expect(transport.records.map { Int(($0.sentAt * 1000).rounded()) } == [0, 300])  // in whole milliseconds
}

// MARK: article "Response cache"

struct Feed: APIResponse, Decodable {
    let posts: [String]
}

struct FeedRequest: APIRequest {
    let url = URL(string: "https://api.example.com/feed")!
    var cacheOption: APIResponseCache.Option = .both
    var cachePartition: String? = "user-42"
}

final class FeedAPI: APIManager {
    typealias Request = FeedRequest
    typealias Response = Feed
    let engine: APIEngine
    init(engine: APIEngine = APIEngine(cache: .shared)) { self.engine = engine }
}

func showFeed(from feedAPI: FeedAPI, show: (Feed, Bool) -> Void) async throws {
    // The stored feed at once, then the network's.
    for try await delivery in feedAPI.responses(for: FeedRequest()) {
        show(delivery.response, delivery.source == .cache)
    }
}

let otherOptions: [FeedRequest] = [
    FeedRequest(cacheOption: .networkOnly),  // always the network; stores the answer
    FeedRequest(cacheOption: .cacheOnly),  // the stored answer if any, else the network
    FeedRequest(cacheOption: .fresh(maxAge: 300)),  // stored if younger than 5 minutes, else revalidate
]

// MARK: article "Concurrency policies", "Which row is for search"

struct Search: APIRequest {
    let query: String
    var url: URL { URL(string: "https://api.example.com/search")! }
    var parameters: APIParameters { .query(["q": .string(query)]) }
    var concurrencyPolicy: APIConcurrencyPolicy { .debounceLatest }
    var debounceInterval: TimeInterval { 0.25 }
}

final class SearchAPI: APIManager {
    typealias Request = Search
    typealias Response = Echo
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

// MARK: the documentation of APIRequest (APIManagerKit.docc/APIRequest.md), "A base URL"

struct GetProduct: APIRequest {
    let id: Int
    var path: String { "products/{id}" }
    var parameters: APIParameters { .path(["id": .int(id)]) }
}

func makeShopEngine() -> APIEngine {
    var configuration = APIEngine.Configuration()
    configuration.baseURL = URL(string: "https://shop.example/api")
    return APIEngine(configuration: configuration)
}

final class ProductPageAPI: APIManager {
    typealias Request = GetProduct
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

// MARK: Checks of the samples themselves

// MARK: the documentation of APIRequest (APIManagerKit.docc/APIRequest.md)

struct AddToCart: APIRequest, Encodable {
    let productID: Int
    let quantity: Int

    var url: URL { URL(string: "https://shop.example/cart/items")! }
    var method: HTTPMethod { .post }
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
    var concurrencyScope: String? { "cart" }
}

final class AddToCartAPI: APIManager {
    typealias Request = AddToCart
    typealias Response = APIEmptyResponse
    typealias Delegate = any APIManagerDelegate

    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

@Suite("README and article samples", .timeLimit(.minutes(1)))
struct CodeSamplesTests {
    @Test func theAPIRequestSampleSendsItsPropertiesAsJSONOneAtATimeInItsScope() throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.post, "/cart/items", MockTransport.Reply.status(204).held(), .status(204))
        let api = AddToCartAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let first = api.send(AddToCart(productID: 7, quantity: 2))
        let second = api.send(AddToCart(productID: 8, quantity: 1))
        #expect(transport.requests.count == 1, "the second waits in the cart's line")
        guard case .waiting = second.state else {
            Issue.record("the second add is not waiting: \(second.state)")
            return
        }
        let request = try #require(transport.requests.first)
        #expect(request.httpMethod == "POST")
        let body = try JSONSerialization.jsonObject(with: try #require(request.httpBody)) as? [String: Int]
        #expect(body == ["productID": 7, "quantity": 2], "only the stored properties are encoded")
        #expect(transport.release())
        guard case .finished = first.state, case .finished = second.state else {
            Issue.record("expected both adds finished, got \(first.state) and \(second.state)")
            return
        }
        #expect(transport.requests.count == 2)
    }

    @Test func theHelloWorldRequestAndResponseAreWhatTheREADMESays() throws {
        #expect(Hello().url.absoluteString == "https://httpbin.org/get" && Hello().method == .get)
        let greeting = try JSONDecoder().decode(Greeting.self, from: Data(#"{"url":"https://httpbin.org/get"}"#.utf8))
        #expect(greeting.url == "https://httpbin.org/get")
        #expect(HelloAPI().engine.transport is URLSessionTransport)
    }

    @Test func theBaseURLSampleSendsTheProductPathUnderTheBasesPath() {
        let transport = MockTransport()
        transport.stub(.get, "/api/products/2", .status(204))
        var configuration = makeShopEngine().configuration
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .inline
        let api = ProductPageAPI(engine: APIEngine(configuration: configuration))
        #expect(api.send(GetProduct(id: 2)).state.name == "finished")
        #expect(transport.requests.first?.url?.absoluteString == "https://shop.example/api/products/2")
    }

    @Test func theSearchSampleDeliversOnlyTheLatestQuerysAnswer() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/search") { request in
            // The short query is slow to answer.
            request.url?.query == "q=s" ? MockTransport.Reply.json("{}").after(2) : .json("{}").after(0.1)
        }
        let api = SearchAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let short = api.send(Search(query: "s"))
        clock.advance(by: 0.5)
        let long = api.send(Search(query: "swift"))
        clock.runUntilIdle()
        #expect(transport.records.compactMap { $0.request.url?.query } == ["q=s", "q=swift"])
        #expect(short.state == .failed(.cancelled(reason: .policy)))
        #expect(long.state == .finished)
    }

    @Test func theFeedSampleShowsTheStoredFeedThenTheNetworks() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.get, "/feed", .json(#"{"posts":["old"]}"#), .json(#"{"posts":["new"]}"#))
        let cache = APIResponseCache(disk: nil, clock: clock)
        let feedAPI = FeedAPI(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: .inline, cache: cache))
        feedAPI.send(otherOptions[0])
        var shown: [String] = []
        try await showFeed(from: feedAPI) { feed, stale in shown.append("\(feed.posts[0]) stale:\(stale)") }
        #expect(shown == ["old stale:true", "new stale:false"])
        #expect(feedAPI.send(otherOptions[1]).responseSource == .cache)
        #expect(feedAPI.send(otherOptions[2]).responseSource == .cache)
    }

    @Test func theAsyncSampleReturnsTheTypedCart() async throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(.post, "/api/cart/items", .json(#"{"items":[{"sku":"A","quantity":1}]}"#))
        let cartAPI = CartAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        let item = CartItem(sku: "A", quantity: 1)
        let cart = try await cartAPI.response(for: .add(item))  // throws APIError
        #expect(cart.items == [item])
        #expect(transport.requests.first?.value(forHTTPHeaderField: "Content-Type") == "application/json")
    }

    @Test func theEnvelopeSampleReadsAGoodEnvelopeAndRejectsABadOne() throws {
        let good = APIRawResponse(
            statusCode: 200, body: Data(#"{"code":0,"message":"","result":{"temperature":21.5}}"#.utf8))
        #expect(try WeatherEnvelope(from: good).temperature == 21.5)
        let bad = APIRawResponse(statusCode: 200, body: Data(#"{"code":7,"message":"quota"}"#.utf8))
        #expect(throws: APIEnvelopeError.self) { try WeatherEnvelope(from: bad) }
    }

    @Test func thePatientRetryHookRetriesServerErrorsAndGivesUpOnClientErrors() throws {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        let api = PatientAPI(
            engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
        transport.stub(.post, "/api/cart/items", .status(400))
        let rejected = api.send(try .add(CartItem(sku: "A", quantity: 1)))
        #expect(rejected.attemptCount == 1)
        #expect(rejected.state.isTerminal)

        transport.stub(.post, "/api/cart/items", .status(500))
        let failing = api.send(try .add(CartItem(sku: "A", quantity: 1)))
        clock.advance(by: 10)
        #expect(failing.attemptCount == 3)
        #expect(failing.state.isTerminal)
        #expect(transport.records.map(\.sentAt) == [0, 0, 1, 2])
    }
}
