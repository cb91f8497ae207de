import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

// MARK: article "Observing requests" (compared word for word by Scripts/check-doc-counts.py)

func loggedEngine() -> APIEngine {
    var configuration = APIEngine.Configuration()
    configuration.observers = [
        APIEngine.LogObserver(minimumLevel: .debug, bodyBytes: 256) { level, line in
            print("[\(level)] \(line)")
        }
    ]
    return APIEngine(configuration: configuration)
}

final class LineTimes: APIEngine.Observer, @unchecked Sendable {
    // @unchecked: both dictionaries are read and written only under `lock`.
    private let lock = NSLock()
    private var sentAt: [UInt64: TimeInterval] = [:]
    private var waits: [String: [TimeInterval]] = [:]

    func observe(_ observation: APIEngine.Observation) {
        let task = observation.task
        lock.withLock {
            switch observation.kind {
            case .sent:
                sentAt[task.identifier] = observation.time
            case .started(attempt: 1):
                guard let sent = sentAt.removeValue(forKey: task.identifier) else { return }
                waits[task.concurrencyScope ?? "(none)", default: []].append(observation.time - sent)
            case .ended:
                sentAt[task.identifier] = nil
            default:
                break
            }
        }
    }

    /// The waits in line of each scope, in seconds.
    var waitsByScope: [String: [TimeInterval]] { lock.withLock { waits } }
}

// MARK: the samples, run

@Suite("Observing requests, the article's samples")
struct ObservingCodeSamplesTests {
    @Test func theLoggedEngineIsAnEngineWithALogObserver() {
        let engine = loggedEngine()
        #expect(engine.observers.count == 1)
        #expect(engine.observers.first is APIEngine.LogObserver)
    }

    @Test func lineTimesMeasureTheWaitOfEachScopesTasksOnTheVirtualClock() {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/edit", MockTransport.Reply.json(#"{"value":"ok"}"#).after(2))
        let times = LineTimes()
        var configuration = APIEngine.Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.delivery = .inline
        configuration.execution = .inline
        configuration.observers = [times]
        let manager = SampleEditsAPI(engine: APIEngine(configuration: configuration))
        for _ in 0..<3 { manager.send(SampleEdit()) }
        clock.advance(by: 2)
        clock.advance(by: 2)
        clock.advance(by: 2)
        #expect(times.waitsByScope == ["cart": [0, 2, 4]])
    }
}

private struct SampleEdit: APIRequest {
    var url: URL { URL(string: "https://shop.example.com/edit") ?? URL(fileURLWithPath: "/") }
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
    var concurrencyScope: String? { "cart" }
}

private final class SampleEditsAPI: APIManager {
    typealias Request = SampleEdit
    typealias Response = APIEmptyResponse
    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }
}
