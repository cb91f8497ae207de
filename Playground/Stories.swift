import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request of a story: a label for the timeline, a path on the simulated backend, a policy.
struct StoryRequest: APIRequest {
    let label: String
    let url: URL
    let path: String
    var concurrencyPolicy: APIConcurrencyPolicy = .default
    var retryPolicy: APIRetryPolicy?
    var cacheOption: APIResponseCache.Option = .networkOnly
    var debounceInterval: TimeInterval = 0.3
    var sharing: APIConcurrencyPolicy.Sharing = .never
    var concurrencyGroup: APIConcurrencyPolicy.Group?
    var method: HTTPMethod = .get
    var parameters: APIParameters = .none
    var headers: [String: String] = [:]
    var reportsProgress = false
    var download: APIDownload?
}

final class StoryAPI: APIManager {
    typealias Request = StoryRequest
    typealias Response = APIRawResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}

/// Prints one line per event, stamped with the story's clock.
final class Timeline: APIManagerDelegate, @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock` (events of a live story arrive on the
    // URLSession's threads).
    let clock: any APIClock
    let origin: TimeInterval
    private let lock = NSLock()
    private var lines: [String] = []

    init(clock: any APIClock) {
        self.clock = clock
        self.origin = clock.now
    }

    func log(_ task: AnyAPITask, _ what: String) {
        let label =
            (task as? APITask<StoryRequest>)?.request.label ?? (task as? APITask<CartEdit>)?.request.label ?? "?"
        write("#\(task.identifier)", label, what)
    }

    /// A line about something other than a task (a credential refresh).
    func note(_ label: String, _ what: String) {
        write("", label, what)
    }

    private func write(_ number: String, _ label: String, _ what: String) {
        let time = String(format: "%6.3fs", clock.now - origin)
        let line =
            "  \(time)  \(number.padding(toLength: 4, withPad: " ", startingAt: 0))"
            + "\(label.padding(toLength: 18, withPad: " ", startingAt: 0)) \(what)"
        lock.withLock {
            lines.append(line)
            print(line)
        }
    }

    func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask) {
        log(task, "waits (\(task.concurrencyPolicy))")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {
        log(task, attempt == 1 ? "starts" : "starts attempt \(attempt)")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, willRetryAfter delay: Double, error: APIError) {
        log(
            task,
            String(format: "failed (%@), retries in %.3fs", Self.reason(error), delay))
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {
        let status = (response as? APIRawResponse)?.statusCode ?? 0
        switch task.responseSource {
        case .cache?: log(task, "ends: \(status) from the cache, nothing sent")
        case .revalidated?: log(task, "ends: \(status) from the cache, confirmed by a 304")
        default: log(task, "ends: \(status)")
        }
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReport progress: APITransferProgress) {
        let percent = progress.fraction.map { String(format: "%3.0f%%", $0 * 100) } ?? "   ?"
        let mebibytes = Double(progress.completedBytes) / Double(1 << 20)
        log(task, String(format: "%@ %@ %@", "\(progress.direction)", percent, String(format: "(%.1f MiB)", mebibytes)))
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReceiveCachedResponse response: any APIResponse) {
        log(task, "shows the cached copy at once")
    }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) {
        switch error {
        case .cancelled(let reason): log(task, "cancelled (\(reason))")
        case .ignored: log(task, "ignored")
        case .circuitOpen: log(task, "fails at once: the circuit is open, nothing sent")
        case .transport: log(task, "fails: \(Self.reason(error))")
        default: log(task, "fails: \(error.statusCode.map { "status \($0)" } ?? "\(error)")")
        }
    }

    /// A failure in a few words: its status, or what became of the connection.
    static func reason(_ error: APIError) -> String {
        if let status = error.statusCode { return "\(status)" }
        if case .transport(let underlying as URLError) = error {
            return underlying.code == .networkConnectionLost
                ? "the connection dropped" : "URLError \(underlying.code.rawValue)"
        }
        return "error"
    }
}

/// Where a story runs: a simulated backend on virtual time (a `MockTransport` whose replies take
/// clock time), or a real httpbin-compatible server (`--base-url`) on real time.
final class Stage: @unchecked Sendable {
    // @unchecked: `livePaths` is written while the story sets up, on its one thread, before sending.
    let clock: any APIClock
    let backend = MockTransport(clock: TestClock())
    let api: StoryAPI
    let timeline: Timeline
    let baseURL: URL
    let isLive: Bool
    let authentication: APIAuthentication?
    /// What the stage's engines send with: the simulated backend, or the live transport.
    let transport: any APITransport
    private var livePaths: [String: String] = [:]

    /// - Parameters:
    ///   - liveBaseURL: a real server, or `nil` for the simulated backend.
    ///   - authentication: makes the story's authentication, if it has one.
    ///   - recorder: records every attempt of the stage's engines as HAR (`--record`), if given.
    init(
        liveBaseURL: URL? = nil, liveTransport: any APITransport = URLSessionTransport(),
        authentication: (@Sendable (Stage.Setting) -> APIAuthentication)? = nil,
        recorder: APIEngine.HARRecorder? = nil
    ) {
        isLive = liveBaseURL != nil
        baseURL = liveBaseURL ?? URL(string: "https://simulated.backend")!
        clock = liveBaseURL == nil ? backend.clock : DispatchClock()
        timeline = Timeline(clock: clock)
        let authentication = authentication?(
            Setting(clock: clock, baseURL: baseURL, isLive: isLive, timeline: timeline))
        self.authentication = authentication
        transport = isLive ? liveTransport : backend
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.randomSource = SeededRandom(seed: 7)
        configuration.delivery = .inline
        configuration.execution = isLive ? .concurrent() : .inline
        configuration.cache = APIResponseCache(disk: nil, clock: clock)
        configuration.authentication = authentication
        configuration.observers = recorder.map { [$0] } ?? []
        api = StoryAPI(engine: APIEngine(configuration: configuration))
        api.delegate = timeline
    }

    /// What a story's authentication is made for.
    struct Setting {
        let clock: any APIClock
        let baseURL: URL
        let isLive: Bool
        let timeline: Timeline
    }

    /// Scripts `path` on the simulated backend with a handler; on a live server, requests for
    /// `path` go to `live`.
    func stub(_ path: String, live: String, handler: @escaping @Sendable (URLRequest) -> MockTransport.Reply) {
        livePaths[path] = live
        backend.stub(nil, path, handler: handler)
    }

    /// Scripts `path` on the simulated backend; on a live server, requests for `path` go to `live`
    /// (an httpbin endpoint that behaves alike, such as `delay/0.3`).
    func stub(_ path: String, _ replies: MockTransport.Reply..., live: String) {
        livePaths[path] = live
        backend.stub(nil, path, replies: replies)
    }

    /// The path a request for `path` takes: itself on the simulated backend, its live path on a
    /// real server.
    func path(_ path: String) -> String {
        isLive ? livePaths[path] ?? path : path
    }

    @discardableResult
    func send(
        _ label: String, _ path: String, _ policy: APIConcurrencyPolicy = .default, retry: APIRetryPolicy? = nil,
        cache: APIResponseCache.Option = .networkOnly, through api: StoryAPI? = nil,
        configure: (inout StoryRequest) -> Void = { _ in }
    ) -> APITask<StoryRequest> {
        var request = StoryRequest(
            label: label, url: baseURL, path: isLive ? livePaths[path] ?? path : path, concurrencyPolicy: policy,
            retryPolicy: retry, cacheOption: cache)
        configure(&request)
        return (api ?? self.api).send(request)
    }

    /// Another manager on the stage's transport and clock, on an engine of its own, its events on
    /// the same timeline.
    func makeAPI(circuitBreaker: APIEngine.CircuitBreaker? = nil) -> StoryAPI {
        let api = StoryAPI(
            engine: APIEngine(
                transport: transport, clock: clock, delivery: .inline, execution: isLive ? .concurrent() : .inline,
                circuitBreaker: circuitBreaker))
        api.delegate = timeline
        return api
    }

    /// Moves to `seconds` after the story began: virtual time is advanced, real time is waited for.
    /// Waits until the story's requests have ended, at most `limit` seconds: on a busy machine a
    /// live server answers late, and a story's last lines must print under it, not under the next.
    /// Another engine's requests (`engine`, the stage's own unless given) are waited for alike.
    func settle(_ engine: APIEngine? = nil, upTo limit: TimeInterval = 30) {
        let engine = engine ?? api.engine
        let end = Date().addingTimeInterval(limit)
        while engine.inFlightCount > 0, Date() < end { Thread.sleep(forTimeInterval: 0.01) }
    }

    func at(_ seconds: TimeInterval) {
        if let clock = clock as? TestClock {
            clock.advance(by: seconds - clock.now)
        } else {
            let remaining = seconds - (clock.now - timeline.origin)
            if remaining > 0 { Thread.sleep(forTimeInterval: remaining) }
        }
    }
}

/// A deterministic jitter source, so the flaky story prints the same delays every run.
struct SeededRandom: APIRetryPolicy.RandomSource {
    let seed: UInt64
    private let counter = Counter()
    init(seed: UInt64) { self.seed = seed }

    func nextUnitInterval() -> Double {
        var z = seed &+ counter.next() &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }

    final class Counter: @unchecked Sendable {
        // @unchecked: `value` is only touched under `lock`.
        private let lock = NSLock()
        private var value: UInt64 = 0
        func next() -> UInt64 {
            lock.withLock {
                value += 1
                return value
            }
        }
    }
}

struct Story: Sendable {
    let name: String
    let title: String
    /// Makes the story's authentication, if it has one.
    var authentication: (@Sendable (Stage.Setting) -> APIAuthentication)? = nil
    let run: @Sendable (Stage) -> Void

    static let all: [Story] = [
        cart, search, refresh, detail, flaky, cache, session, profile, typeAhead, gallery, autosave, sharedProfile,
        outage, photoUpload, resumedDownload, liveFeed, offline, cartScreen,
    ]

    static let cart = Story(
        name: "cart", title: "Cart: add, update and remove never overlap or reorder (waitUntilDone)"
    ) { stage in
        stage.stub("/cart/items", MockTransport.Reply.status(200).after(0.3), live: "delay/0.3")
        stage.send("add item", "/cart/items", .waitUntilDone)
        stage.send("update quantity", "/cart/items", .waitUntilDone)
        stage.send("remove item", "/cart/items", .waitUntilDone)
        stage.at(2)
    }

    static let search = Story(name: "search", title: "Search as you type: only the latest query matters (cancelOthers)")
    { stage in
        stage.stub("/search", MockTransport.Reply.status(200).after(0.25), live: "delay/0.25")
        for (index, query) in ["s", "sw", "swi", "swift"].enumerated() {
            stage.at(Double(index) * 0.1)
            stage.send("search \"\(query)\"", "/search", .cancelOthers)
        }
        stage.at(2)
    }

    static let refresh = Story(
        name: "refresh", title: "Pull to refresh: a second pull while loading is ignored (ignoreCurrent)"
    ) { stage in
        stage.stub("/feed", MockTransport.Reply.status(200).after(0.5), live: "delay/0.5")
        stage.send("pull 1", "/feed", .ignoreCurrent)
        stage.at(0.2)
        stage.send("pull 2", "/feed", .ignoreCurrent)
        stage.at(1.0)
        stage.send("pull 3", "/feed", .ignoreCurrent)
        stage.at(2)
    }

    static let detail = Story(
        name: "detail", title: "Detail pages: the page opened last loads first (waitUntilDoneHighPriority)"
    ) { stage in
        stage.stub("/list", MockTransport.Reply.status(200).after(0.5), live: "delay/0.5")
        stage.stub("/detail", MockTransport.Reply.status(200).after(0.2), live: "delay/0.2")
        stage.send("load list", "/list")
        for item in 1...3 {
            stage.at(Double(item) * 0.1)
            stage.send("open item \(item)", "/detail", .waitUntilDoneHighPriority)
        }
        stage.at(2)
    }

    static let flaky = Story(name: "flaky", title: "Flaky endpoint: retried with exponential backoff and full jitter") {
        stage in
        // httpbin has no failing-then-succeeding endpoint: live, every attempt gets a 503.
        stage.stub(
            "/flaky", MockTransport.Reply.status(503).after(0.1), MockTransport.Reply.status(502).after(0.1),
            MockTransport.Reply.status(200).after(0.1), live: "status/503")
        stage.send("flaky GET", "/flaky", retry: APIRetryPolicy(maxAttempts: 4, baseDelay: 0.4))
        stage.at(5)
    }

    static let cache = Story(name: "cache", title: "Cached feed: stored, shown at once, revalidated (cache options)") {
        stage in
        // httpbin's /etag/v1 answers 200 with ETag "v1", and 304 to If-None-Match: "v1".
        stage.stub(
            "/feed", MockTransport.Reply.status(200, headers: ["ETag": "\"v1\""]).after(0.3),
            MockTransport.Reply.status(304, headers: ["ETag": "\"v1\""]).after(0.3), live: "etag/v1")
        stage.send("load feed", "/feed", cache: .networkOnly)
        stage.at(1)
        stage.send("reopen feed", "/feed", cache: .both)
        stage.at(2)
        stage.send("offline feed", "/feed", cache: .cacheOnly)
        stage.at(3)
        stage.send("feed < 10 s old", "/feed", cache: .fresh(maxAge: 10))
        stage.at(4)
    }
}
