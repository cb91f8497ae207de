import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The stories of the policies beyond the first five: debounceLatest, a shared limit, conflation, shared
/// identical requests, and the circuit breaker.
extension Story {
    static let typeAhead = Story(
        name: "typeahead",
        title:
            "Type-ahead: a pause sends the query, the next one cancels it, only the latest answer arrives (debounceLatest)"
    ) { stage in
        // The server is slow to answer the short query (2 s) and quick with the long one (0.2 s):
        // under `debounce` the answer to "s" would arrive after the one to "swift".
        stage.stub("/suggest/short", MockTransport.Reply.status(200).after(2), live: "delay/2")
        stage.stub("/suggest/long", MockTransport.Reply.status(200).after(0.2), live: "delay/0.2")
        stage.send("type \"s\"", "/suggest/short", .debounceLatest)
        // A pause: "s" is sent at 0.3 s. Then the user types on.
        for (index, query) in ["sw", "swi", "swif", "swift"].enumerated() {
            stage.at(0.5 + Double(index) * 0.1)
            stage.send("type \"\(query)\"", "/suggest/long", .debounceLatest)
        }
        stage.at(3)
    }

    static let gallery = Story(
        name: "gallery", title: "Gallery: 20 thumbnails, two managers, one limit of 4 (a concurrency group)"
    ) { stage in
        stage.stub("/thumbnail", MockTransport.Reply.status(200).after(0.2), live: "delay/0.2")
        let group = APIConcurrencyPolicy.Group(limit: 4)
        let peak = Peak()
        let managers = [stage.api, stage.makeAPI()]
        for manager in managers {
            manager.engine.eventMonitor = { event in
                if case .started = event.kind { peak.note(group.runningCount) }
            }
        }
        let tasks = (0..<20).map { index in
            stage.send("thumbnail \(index + 1)", "/thumbnail", .limited, through: managers[index % 2]) {
                $0.concurrencyGroup = group
            }
        }
        stage.at(3)
        let loaded = tasks.filter { if case .finished = $0.state { true } else { false } }.count
        stage.timeline.note("gallery", "\(loaded) of 20 loaded, at most \(peak.value) at once")
    }

    static let autosave = Story(
        name: "autosave", title: "Autosave: one save runs, only the newest waits (conflate)"
    ) { stage in
        stage.stub("/document", MockTransport.Reply.status(200).after(0.25), live: "delay/0.25")
        for version in 1...4 {
            stage.at(Double(version - 1) * 0.1)
            stage.send("save version \(version)", "/document", .conflate)
        }
        stage.at(2)
    }

    static let sharedProfile = Story(
        name: "sharing", title: "Two screens ask for the same profile: one request on the wire (sharing)"
    ) { stage in
        stage.stub("/me", MockTransport.Reply.status(200).after(0.3), live: "delay/0.3")
        let wire = Peak()
        stage.api.engine.eventMonitor = { event in
            if case .started = event.kind { wire.add() }
        }
        for screen in ["home screen", "settings screen"] {
            stage.send(screen, "/me") { $0.sharing = .safeMethods }
        }
        stage.at(2)
        stage.timeline.note("profile", "2 screens answered, \(wire.count) request(s) on the wire")
    }

    static let outage = Story(
        name: "outage", title: "Outage: the circuit opens after 3 failures, a probe closes it (circuit breaker)"
    ) { stage in
        // The simulated server fails until 1.5 s; live, the failing requests go to /status/503 and
        // the later ones to /get, on the same origin.
        stage.stub("/items", MockTransport.Reply.status(503).after(0.1), live: "status/503")
        stage.stub("/items/again", MockTransport.Reply.status(200).after(0.1), live: "get")
        let api = stage.makeAPI(circuitBreaker: APIEngine.CircuitBreaker(failureThreshold: 3, openInterval: 1))
        let timeline = stage.timeline
        api.engine.eventMonitor = { event in
            switch event.kind {
            case .circuitOpened(_, let seconds): timeline.note("circuit", "opens for \(seconds) s")
            case .circuitClosed: timeline.note("circuit", "closes: the probe succeeded")
            default: break
            }
        }
        for index in 1...3 {
            stage.at(Double(index - 1) * 0.2)
            stage.send("load \(index)", "/items", through: api)
        }
        stage.at(0.8)
        stage.send("load 4", "/items/again", through: api)
        stage.at(1.6)
        stage.send("probe", "/items/again", through: api)
        stage.at(2.0)
        stage.send("load 5", "/items/again", through: api)
        stage.at(3)
    }
}

/// Counts, behind a lock: the most seen at once, or how many times.
final class Peak: @unchecked Sendable {
    // @unchecked: both values are only touched under `lock`.
    private let lock = NSLock()
    private var most = 0
    private var times = 0
    func note(_ current: Int) { lock.withLock { most = max(most, current) } }
    func add() { lock.withLock { times += 1 } }
    var value: Int { lock.withLock { most } }
    var count: Int { lock.withLock { times } }
}
