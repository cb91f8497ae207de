import APIManagerKit
import APIManagerKitTesting
import Foundation
import Observation

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

/// The banner a cart screen shows from its scope's observable model (``APIEngine/Activity``),
/// written to the timeline each time observation says a figure it read changed (as SwiftUI would
/// render it again).
@available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
@MainActor final class CartBanner {
    private let activity: APIEngine.Activity
    private let timeline: Timeline
    private var changed = true

    init(_ activity: APIEngine.Activity, timeline: Timeline) {
        self.activity = activity
        self.timeline = timeline
    }

    private var text: String {
        guard activity.durablePending > 0 else { return "no edit pending" }
        let edits = activity.durablePending == 1 ? "1 edit" : "\(activity.durablePending) edits"
        return activity.network == .online ? "sending \(edits)" : "\(edits) will be sent when you are back online"
    }

    /// Writes the banner if observation said it changed since it was last written.
    func show() {
        guard changed else { return }
        changed = false
        let text = withObservationTracking {
            self.text
        } onChange: { [weak self] in
            MainActor.assumeIsolated { self?.changed = true }
        }
        timeline.note("cart banner", text)
    }
}

/// The screen's banner of the current run, where the platform has Observation (always on Linux).
final class BannerSlot: @unchecked Sendable {
    // @unchecked: used on the main thread only (the story runs in the Playground's top-level code).
    private var banner: AnyObject?

    /// A new screen on `cart`: its banner is written at once.
    func open(on cart: CartEditsAPI, timeline: Timeline) {
        MainActor.assumeIsolated {
            guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
            banner = CartBanner(cart.engine.activity(inScope: "cart"), timeline: timeline)
        }
        show()
    }

    func show() {
        // Live, the models change in hops to the main queue: run them first.
        RunLoop.main.run(until: Date())
        MainActor.assumeIsolated {
            guard #available(macOS 14, iOS 17, tvOS 17, watchOS 10, *) else { return }
            (banner as? CartBanner)?.show()
        }
    }

    /// The app is killed: the screen goes with it.
    func close() { banner = nil }
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
        let banner = BannerSlot()
        if let firstRun { banner.open(on: firstRun, timeline: timeline) }
        var keys: [String] = []
        for (index, label) in ["add tea", "add cake", "remove tea"].enumerated() {
            stage.at(Double(index) * 0.1)
            if let task = firstRun?.send(edit(label)) {
                keys.append(task.idempotencyKey ?? "?")
                // The first waits for the network (the others wait in line behind it, as the delegate says).
                if index == 0 { timeline.log(task, task.state.isTerminal ? "\(task.state)" : "waits for the network") }
            }
            banner.show()
        }
        stage.at(0.5)
        banner.close()
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
        banner.open(on: cart, timeline: timeline)
        stage.at(2)
        timeline.note("network", "back")
        network.isReachable = true
        banner.show()
        for step in 1...10 {
            stage.at(2 + Double(step) / 10)
            banner.show()
        }
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
