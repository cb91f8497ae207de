import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(SwiftUI)
import SwiftUI
#endif

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

@available(macOS 14, iOS 17, *)
@MainActor final class CartStatusModel {
    let activity: APIEngine.Activity

    init(cart: CartEditsAPI) {
        activity = cart.engine.activity(inScope: "cart")
    }

    var banner: String? {
        if activity.isStoppedByRefusal { return "The server refused an edit: review it" }
        guard activity.durablePending > 0 else { return nil }
        let edits = activity.durablePending == 1 ? "1 edit" : "\(activity.durablePending) edits"
        return activity.network == .online ? "Sending \(edits)…" : "\(edits) will be sent when you are back online"
    }
}

// Compiled where SwiftUI is (Apple platforms, in the workflow's macOS job); the model above everywhere.
#if canImport(SwiftUI)
@available(macOS 14, iOS 17, *)
struct CartBanner: View {
    let model: CartStatusModel

    var body: some View {
        if let banner = model.banner {
            Text(banner)
        }
    }
}
#endif

@Suite("Article samples: offline and relaunch", .timeLimit(.minutes(1)))
struct DurableCodeSamplesTests {
    @available(macOS 14, iOS 17, *)
    @MainActor @Test func theCartBannerSaysHowManyEditsWaitForTheNetworkThenGoes() throws {
        let folder = TemporaryFolder("cart-banner")
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/api/cart", .json(#"{"items":[]}"#))
        let connectivity = MockTransport.Connectivity(isReachable: false)
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.connectivity = connectivity
        configuration.durableStore = APIEngine.DurableStore(directory: folder.url)
        let cart = CartEditsAPI(engine: APIEngine(configuration: configuration))
        let model = CartStatusModel(cart: cart)
        #expect(model.banner == nil)
        cart.send(.add(item: "tea", count: 1))
        #expect(model.banner == "1 edit will be sent when you are back online")
        cart.send(.add(item: "milk", count: 2))
        cart.send(.remove(item: "tea"))
        #expect(model.banner == "3 edits will be sent when you are back online")
        connectivity.isReachable = true
        clock.runUntilIdle()
        #expect(model.banner == nil)
        #expect(transport.records.count == 3)
    }

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
