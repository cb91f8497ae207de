// Article "The delegate and async", "A screen on the main actor", as an app target compiles it:
// main-actor isolated by default, its conformance to the delegate protocol isolated (inferred).
import APIManagerKit

final class CartViewModel: CartAPIDelegate {
    private(set) var cart = Cart(items: [])
    private(set) var failure: APIError?
    private let api: CartAPI

    init(api: CartAPI) {
        self.api = api
        api.delegate = self
    }

    func add(_ item: CartItem) {
        do {
            api.send(try .add(item))
        } catch {
            failure = .invalidRequest(reason: "the item could not be encoded", underlying: error)
        }
    }

    func cartAPI(_ api: CartAPI, didUpdate cart: Cart) {
        self.cart = cart
        failure = nil
    }

    func cartAPI(_ api: CartAPI, didFailWith error: APIError) {
        failure = error
    }
}
