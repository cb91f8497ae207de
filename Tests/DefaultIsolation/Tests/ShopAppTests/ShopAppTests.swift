// Tests as an app target's test target writes them: default isolation `MainActor`, so each test
// runs on the main actor, driving the engine with `.inline` delivery and execution on a `TestClock`.
import APIManagerKit
import APIManagerKitTesting
import Dispatch
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
