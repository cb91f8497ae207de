import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

// MARK: article "Offline and relaunch" (compared word for word by Scripts/check-doc-counts.py)

enum CartEdit: APIRequest, Codable {
    case add(item: String, count: Int)
    case remove(item: String)

    var url: URL { URL(string: "https://shop.example.com/api/cart")! }
    var method: HTTPMethod {
        switch self {
        case .add: return .post
        case .remove: return .delete
        }
    }
    var concurrencyPolicy: APIConcurrencyPolicy { .durable }
    var concurrencyScope: String? { "cart" }
    var idempotencyKey: APIIdempotencyKey? { .standard }
}

final class CartEditsAPI: APIManager {
    typealias Request = CartEdit
    typealias Response = Cart
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

func openCart(
    keepingLinesIn folder: URL, transport: any APITransport = URLSessionTransport.shared
) throws -> CartEditsAPI {
    var configuration = APIEngine.Configuration()
    configuration.transport = transport
    configuration.durableStore = APIEngine.DurableStore(directory: folder)
    let cart = CartEditsAPI(engine: APIEngine(configuration: configuration))
    let replay = try cart.replayDurableTasks(inScope: "cart")
    print("sent again: \(replay.count), set aside: \(replay.setAside.count)")
    return cart
}

func cartStore(keepingLinesIn folder: URL) -> APIEngine.DurableStore {
    APIEngine.DurableStore(directory: folder, scopesWhenRefused: ["cart": .stopTheLine])
}

// The app showed the refusal; the user gave up on that edit:
func giveUpOnTheRefusedEdit(in cart: CartEditsAPI) throws {
    try cart.resolveRefusedDurableTask(inScope: "cart", by: .drop)
}

@Suite("Article samples: offline and relaunch", .timeLimit(.minutes(1)))
struct DurableCodeSamplesTests {
    @Test func theCartEditsKeepTheirCaseAndTheirSettings() throws {
        let edit = CartEdit.add(item: "tea", count: 2)
        let decoded = try JSONDecoder().decode(CartEdit.self, from: JSONEncoder().encode(edit))
        guard case .add(let item, let count) = decoded else {
            Issue.record("decoded as \(decoded)")
            return
        }
        #expect(item == "tea" && count == 2)
        #expect(CartEdit.remove(item: "tea").method == .delete)
        #expect(edit.concurrencyPolicy == .durable)
    }

    @Test func openingTheCartReplaysWhatTheLastRunLeftInOrder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        // The last run: two edits written, the app killed before either was answered.
        do {
            let transport = MockTransport(clock: TestClock())
            transport.stub(nil, "/api/cart", MockTransport.Reply.json(#"{"items":[]}"#).held())
            var configuration = APIEngine.Configuration()
            configuration.transport = transport
            configuration.delivery = .inline
            configuration.execution = .inline
            configuration.durableStore = APIEngine.DurableStore(directory: folder)
            let cart = CartEditsAPI(engine: APIEngine(configuration: configuration))
            cart.send(.add(item: "tea", count: 2))
            cart.send(.remove(item: "cake"))
            #expect(transport.records.count == 1)
        }
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/api/cart", MockTransport.Reply.json(#"{"items":[]}"#).held())
        let cart = try openCart(keepingLinesIn: folder, transport: transport)
        let tasks = cart.inFlightTasks
        #expect(tasks.count == 2)
        #expect(tasks.allSatisfy { $0.isRestored })
        guard case .add? = tasks.first?.request, case .remove? = tasks.last?.request else {
            Issue.record("replayed \(tasks.map(\.request))")
            return
        }
        // In their line, as before: the first goes (on the engine's work queue), the second waits.
        #expect("\(tasks.map(\.state))" == "[running, waiting]")
        cart.cancelAll()
    }

    @Test func aRefusedEditStopsTheCartUntilTheUserGivesUpOnIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let transport = MockTransport(clock: TestClock())
        transport.stub(nil, "/api/cart", .status(422), .json(#"{"items":[]}"#))
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.durableStore = cartStore(keepingLinesIn: folder)
        let cart = CartEditsAPI(engine: APIEngine(configuration: configuration))
        let refused = cart.send(.add(item: "tea", count: 99))
        let next = cart.send(.remove(item: "cake"))
        #expect("\(refused.state)".contains("422"))
        #expect("\(next.state)" == "waiting")
        try giveUpOnTheRefusedEdit(in: cart)
        #expect("\(next.state)" == "finished")
        #expect(transport.records.count == 2)
    }
}
