// Tests as an app target's test target writes them: default isolation `MainActor`, so each test
// runs on the main actor, driving the engine with `.inline` delivery and execution on a `TestClock`.
import APIManagerKit
import APIManagerKitTesting
import Dispatch
import Foundation
import Testing

@testable import ShopApp

// Article "Testing with MockTransport and TestClock", word for word.

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

// Article "The delegate and async", "A screen on the main actor": the test.

@Test func theViewModelShowsTheCartTheServerAnswered() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    let answer = MockTransport.Reply.json(#"{"items":[{"sku":"A","quantity":1}]}"#)
    transport.stub(.post, "/api/cart/items", answer.after(0.3))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let model = CartViewModel(api: api)

    model.add(CartItem(sku: "A", quantity: 1))
    clock.advance(by: 0.3)
    #expect(model.cart.items == [CartItem(sku: "A", quantity: 1)])
    #expect(model.failure == nil)
}

@Test func theViewModelHearsAFailure() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", .status(409))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let model = CartViewModel(api: api)

    model.add(CartItem(sku: "A", quantity: 1))
    #expect(model.failure?.statusCode == 409)
}

// The default delivery, the main queue, as the app runs it: every event reaches the view model.

@Test(.timeLimit(.minutes(1))) func theMainQueueDeliversEveryEventToTheViewModel() async {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", MockTransport.Reply.json(#"{"items":[{"sku":"B","quantity":2}]}"#))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, execution: .inline))
    let model = CartViewModel(api: api)

    model.add(CartItem(sku: "B", quantity: 2))
    // The events wait on the main queue behind this test; yielding lets them through.
    while model.cart.items.isEmpty, !Task.isCancelled { await Task.yield() }
    #expect(model.cart.items == [CartItem(sku: "B", quantity: 2)])
}

// README "One client for many endpoints": the view model on a client over the mock transport.

private func shopClient(_ transport: MockTransport, _ clock: TestClock) -> APIClient {
    var configuration = APIEngine.Configuration()
    configuration.transport = transport
    configuration.clock = clock
    configuration.delivery = .inline
    configuration.execution = .inline
    configuration.baseURL = URL(string: "https://shop.example.com/api")
    return APIClient(configuration: configuration)
}

@Test func theProductViewModelShowsAProductAndOnlyTheLatestSearch() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.get, "/api/products/2", .json(#"{"id":2,"name":"Kettle"}"#))
    transport.stub(.get, "/api/search") { request in
        // The short query is the slow one: its answer would come last.
        let query = request.url?.query ?? ""
        let name = query == "q=k" ? "Kayak" : "Kettle"
        return MockTransport.Reply.json(#"{"products":[{"id":1,"name":"\#(name)"}]}"#).after(query == "q=k" ? 2 : 0.1)
    }
    let model = ProductViewModel(shop: shopClient(transport, clock))

    model.show(productID: 2)
    #expect(model.product?.name == "Kettle")

    model.search("k")
    clock.advance(by: 0.5)  // a pause: "k" is sent
    model.search("kettle")
    clock.runUntilIdle()
    #expect(model.results.map(\.name) == ["Kettle"])
    #expect(model.failure == nil)
}

@Test func theProductViewModelHearsAFailure() {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.get, "/api/products/9", .status(404))
    let model = ProductViewModel(shop: shopClient(transport, clock))
    model.show(productID: 9)
    #expect(model.failure?.statusCode == 404 && model.product == nil)
}

// Article "The delegate and async", "A closure per call": the model hears its own call's outcome.

@Test func theAddButtonModelHearsItsCallsOutcomeOnTheMainActor() throws {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", .json(#"{"items":[{"sku":"A","quantity":1}]}"#).after(0.3), .status(409))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let model = AddButtonModel(api: api)

    try model.add(CartItem(sku: "A", quantity: 1))
    #expect(model.isAdding)
    clock.advance(by: 0.3)
    #expect(!model.isAdding && model.cart?.items == [CartItem(sku: "A", quantity: 1)])

    try model.add(CartItem(sku: "B", quantity: 1))
    #expect(!model.isAdding && model.failure?.statusCode == 409)
}

// The observable models in an app target: the spinner follows the cart's tasks.

@available(macOS 14, iOS 17, *)
@Test func theSpinnerShowsWhileTheCartHasATaskInFlight() throws {
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.stub(.post, "/api/cart/items", MockTransport.Reply.json(#"{"items":[]}"#).after(0.3))
    let api = CartAPI(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let spinner = CartSpinnerModel(api: api)
    #expect(!spinner.showsSpinner && !spinner.isOffline)
    let status = try spinner.statusOfAdding(CartItem(sku: "A", quantity: 1), with: api)
    #expect(spinner.showsSpinner && status.state == .running)
    clock.advance(by: 0.3)
    #expect(!spinner.showsSpinner && status.state == .finished)
}
