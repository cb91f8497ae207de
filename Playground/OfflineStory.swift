import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A cart edit of the offline story: durable, so it is `Codable` (the store keeps it as JSON).
struct CartEdit: APIRequest, Codable {
    let label: String
    let url: URL
    let path: String
    var method: HTTPMethod { .post }
    var parameters: APIParameters { .none }
    var concurrencyPolicy: APIConcurrencyPolicy { .durable }
    var concurrencyScope: String? { "cart" }
    var idempotencyKey: APIIdempotencyKey? { .standard }
}

final class CartEditsAPI: APIManager {
    typealias Request = CartEdit
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

extension Story {
    static let offline = Story(
        name: "offline",
        title: "Offline and relaunch: cart edits kept on disk, replayed in order when the network returns (durable)"
    ) { stage in
        stage.stub("/cart/edits", MockTransport.Reply.status(200).after(0.2), live: "anything/cart/edits")
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("APIManagerKit-Playground-offline-\(getpid())-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let network = MockTransport.Connectivity(isReachable: false)
        let timeline = stage.timeline
        func openCart() -> CartEditsAPI {
            var configuration = APIEngine.Configuration()
            configuration.transport = stage.transport
            configuration.clock = stage.clock
            configuration.delivery = .inline
            configuration.execution = stage.isLive ? .concurrent() : .inline
            configuration.durableStore = APIEngine.DurableStore(directory: folder)
            configuration.connectivity = network
            let cart = CartEditsAPI(engine: APIEngine(configuration: configuration))
            cart.delegate = timeline
            return cart
        }
        func edit(_ label: String) -> CartEdit {
            CartEdit(label: label, url: stage.baseURL, path: stage.path("/cart/edits"))
        }

        // The first run: the network is gone; three edits wait, on disk, in their line.
        timeline.note("network", "gone")
        var firstRun: CartEditsAPI? = openCart()
        var keys: [String] = []
        for (index, label) in ["add tea", "add cake", "remove tea"].enumerated() {
            stage.at(Double(index) * 0.1)
            if let task = firstRun?.send(edit(label)) {
                keys.append(task.idempotencyKey ?? "?")
                // The first waits for the network (the others wait in line behind it, as the delegate says).
                if index == 0 { timeline.log(task, task.state.isTerminal ? "\(task.state)" : "waits for the network") }
            }
        }
        stage.at(0.5)
        firstRun = nil
        let onDisk =
            (try? FileManager.default.subpathsOfDirectory(atPath: folder.path))?
            .filter { $0.hasSuffix(".task") && !$0.contains("set-aside") }.count ?? 0
        timeline.note("app", "killed: \(onDisk) edits left on disk, none sent")

        // The relaunch: the line comes back in its order, still waiting for the network.
        stage.at(1)
        let cart = openCart()
        let restored = (try? cart.replayDurableTasks(inScope: "cart").count) ?? 0
        let replay = cart.inFlightTasks.filter(\.isRestored)
        timeline.note("app", "relaunched: \(restored) edits restored, in order")
        stage.at(2)
        timeline.note("network", "back")
        network.isReachable = true
        stage.at(3)
        if stage.isLive { stage.settle(cart.engine) }
        let sameKeys = replay.map { $0.idempotencyKey ?? "" } == keys
        let finished = replay.filter { task in
            if case .finished = task.state { task.attemptCount == 1 } else { false }
        }.count
        let left =
            (try? FileManager.default.subpathsOfDirectory(atPath: folder.path))?
            .filter { $0.hasSuffix(".task") && !$0.contains("set-aside") }.count ?? 0
        timeline.note(
            "cart",
            "\(finished) of 3 edits sent, one attempt each, in order, \(sameKeys ? "with" : "WITHOUT") their first run's "
                + "idempotency keys; \(left) left on disk")
    }
}
