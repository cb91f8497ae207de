// Article "The delegate and async", "A closure per call", word for word, in an app target whose
// default isolation is MainActor.
import APIManagerKit

final class AddButtonModel {
    private(set) var isAdding = false
    private(set) var cart: Cart?
    private(set) var failure: APIError?
    let api: CartAPI

    init(api: CartAPI) { self.api = api }

    func add(_ item: CartItem) throws {
        isAdding = true
        api.send(try .add(item)) { result in
            self.isAdding = false
            switch result {
            case .success(let cart): self.cart = cart
            case .failure(let error): self.failure = error
            }
        }
    }
}
