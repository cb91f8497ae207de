// README "One client for many endpoints", word for word, in an app target whose default isolation is
// MainActor.
import APIManagerKit
import Foundation

struct Product: APIResponse, Decodable {
    let id: Int
    let name: String
}

struct GetProduct: APIClient.Endpoint {
    typealias Response = Product
    let id: Int
    var path: String { "products/\(id)" }
}

struct SearchResults: APIResponse, Decodable {
    let products: [Product]
}

struct SearchProducts: APIClient.Endpoint {
    typealias Response = SearchResults
    let query: String
    var path: String { "search" }
    var parameters: APIParameters { ["q": .string(query)] }
    var concurrencyPolicy: APIConcurrencyPolicy { .debounceLatest }
}

final class ProductViewModel {
    private(set) var product: Product?
    private(set) var results: [Product] = []
    private(set) var failure: APIError?
    private let shop: APIClient

    init(shop: APIClient = APIClient(baseURL: URL(string: "https://shop.example.com/api")!)) {
        self.shop = shop
    }

    func show(productID: Int) {
        shop.send(GetProduct(id: productID)) { result in
            switch result {
            case .success(let product): self.product = product
            case .failure(let error): self.failure = error
            }
        }
    }

    func search(_ query: String) {
        shop.send(SearchProducts(query: query)) { result in
            if case .success(let found) = result { self.results = found.products }
        }
    }
}
