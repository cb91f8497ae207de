// README "A first manager", as an app target with default isolation `MainActor` compiles it: the
// same code, with `nonisolated` on the item type and on the delegate protocol (the README's "In an
// app target"). Kept word for word by Scripts/check-doc-counts.py.
import APIManagerKit
import Foundation

nonisolated struct CartItem: Codable, Sendable, Equatable {
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

nonisolated protocol CartAPIDelegate: APIManagerDelegate {
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
