// A forwarding method whose label is misspelled (`didFinishWithResponse`): the protocol's default
// would run and the typed delegate never hear the task end. Scripts/test.sh builds this target and
// fails unless the compiler warns ("deprecated default implementation is used to satisfy instance
// method 'task(_:didFinishWith:)'").
import APIManagerKit
import Foundation

struct ItemRequest: APIRequest {
    let url = URL(string: "https://shop.example.com/api/item")!
}

struct Item: APIResponse, Decodable {
    let name: String
}

nonisolated protocol ItemAPIDelegate: APIManagerDelegate {
    func itemAPI(_ api: ItemAPI, didLoad item: Item)
}

final class ItemAPI: APIManager {
    typealias Request = ItemRequest
    typealias Response = Item
    typealias Delegate = any ItemAPIDelegate

    let engine = APIEngine()

    func task(_ task: APITask<ItemRequest>, didFinishWithResponse response: Item) {
        delegate?.itemAPI(self, didLoad: response)
    }

    func task(_ task: APITask<ItemRequest>, didFailWith error: APIError) {}
}
