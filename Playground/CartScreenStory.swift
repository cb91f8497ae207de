import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// A screen on the main actor: a view model isolated to the main actor is the delegate, through an
// isolated conformance (SE-0470), and the engine delivers on the main queue, its default. Every
// typed event reaches it there (see "A screen on the main actor" in "The delegate and async").

/// Puts the whole basket; the server answers with the basket it keeps (httpbin echoes it under `json`).
struct BasketRequest: APIRequest {
    let url: URL
    let path: String
    var method: HTTPMethod = .put
    var body: APIRequestBody?
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
}

struct Basket: APIResponse, Codable {
    var items: [String]
    static var keyPath: String? { "json" }
}

protocol BasketDelegate: APIManagerDelegate {
    func basketAPI(_ api: BasketAPI, didSave basket: Basket)
    func basketAPI(_ api: BasketAPI, didFailWith error: APIError)
}

final class BasketAPI: APIManager {
    typealias Request = BasketRequest
    typealias Response = Basket
    typealias Delegate = any BasketDelegate

    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }

    func task(_ task: APITask<BasketRequest>, didFinishWith response: Basket) {
        delegate?.basketAPI(self, didSave: response)
    }

    func task(_ task: APITask<BasketRequest>, didFailWith error: APIError) {
        delegate?.basketAPI(self, didFailWith: error)
    }
}

/// The screen's model, on the main actor; it knows baskets and errors only.
@MainActor final class BasketViewModel {
    private(set) var shown: [String] = []
    private let api: BasketAPI
    private let stage: Stage

    init(api: BasketAPI, stage: Stage) {
        self.api = api
        self.stage = stage
        api.delegate = self
    }

    func save(_ items: [String], to path: String) {
        do {
            api.send(
                BasketRequest(url: stage.baseURL, path: stage.path(path), body: try .json(Basket(items: items))))
        } catch {
            stage.timeline.note("cart screen", "could not encode the basket: \(error)")
        }
    }

    private func show(_ what: String) {
        stage.timeline.note("cart screen", "\(what) (on the main thread: \(Thread.isMainThread ? "yes" : "no"))")
    }
}

extension BasketViewModel: @MainActor BasketDelegate {
    func basketAPI(_ api: BasketAPI, didSave basket: Basket) {
        shown = basket.items
        show("shows \(basket.items.joined(separator: ", "))")
    }

    func basketAPI(_ api: BasketAPI, didFailWith error: APIError) {
        show("shows an error: \(error.statusCode.map { "status \($0)" } ?? "\(error)")")
    }
}

extension Story {
    static let cartScreen = Story(
        name: "cart-screen",
        title: "A screen on the main actor: typed results reach a @MainActor view model on the main queue"
    ) { stage in
        stage.stub(
            "/basket", live: "anything",
            handler: { request in
                // The simulated backend echoes the basket it was given, as httpbin's /anything does.
                let body = request.httpBody.flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
                return MockTransport.Reply.json(#"{"json":\#(body)}"#).after(0.3)
            })
        stage.stub("/basket/locked", MockTransport.Reply.status(409).after(0.3), live: "status/409")
        // The story runs on the main thread (the Playground's top-level code); the main queue
        // delivers the events whenever the stage lets it run.
        MainActor.assumeIsolated {
            let api = BasketAPI(
                engine: APIEngine(
                    transport: stage.transport, clock: stage.clock, delivery: .queue(.main),
                    execution: stage.isLive ? .concurrent() : .inline))
            let model = BasketViewModel(api: api, stage: stage)
            model.save(["tea"], to: "/basket")
            model.save(["tea", "cake"], to: "/basket")
            stage.at(0.3)
            stage.runMainQueue()
            stage.at(0.6)
            stage.runMainQueue()
            model.save(["tea", "cake", "jam"], to: "/basket/locked")
            stage.at(1)
            stage.settle(api.engine)
            stage.runMainQueue()
            stage.timeline.note(
                "cart", "the screen shows \(model.shown.count) item(s), every answer heard on the main actor")
        }
    }
}

extension Stage {
    /// Lets the main queue run what waits on it (the events of a story that delivers there).
    func runMainQueue() {
        RunLoop.main.run(until: Date())
    }
}
