import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

// Delegates the way apps write them: screens and view models on the main actor, through an isolated
// conformance (SE-0470), a `@preconcurrency` one, or a plain class. Each hears every event of every
// task exactly once, in order, on the main thread when delivery is the main queue or `.inline` in a
// `@MainActor` test.

/// Whether the caller runs on the main queue, the main actor's executor. (Not `Thread.isMainThread`:
/// where the process called `dispatchMain()`, as the test runner on Linux does, another thread drains
/// the main queue.)
func isOnMainQueue() -> Bool {
    DispatchQueue.getSpecific(key: mainQueueKey) == true
}

private let mainQueueKey: DispatchSpecificKey<Bool> = {
    let key = DispatchSpecificKey<Bool>()
    DispatchQueue.main.setSpecific(key: key, value: true)
    return key
}()

protocol ShopDelegate: APIManagerDelegate {
    func shop(_ shop: ShopAPI, didLoad echo: Echo, task: UInt64)
    func shop(_ shop: ShopAPI, didFailWith error: APIError, task: UInt64)
}

final class ShopAPI: APIManager {
    typealias Request = TestRequest
    typealias Response = Echo
    typealias Delegate = any ShopDelegate

    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }

    func task(_ task: APITask<TestRequest>, didFinishWith response: Echo) {
        delegate?.shop(self, didLoad: response, task: task.identifier)
    }

    func task(_ task: APITask<TestRequest>, didFailWith error: APIError) {
        delegate?.shop(self, didFailWith: error, task: task.identifier)
    }
}

/// What a screen heard, and whether each event came on the main thread.
@MainActor protocol HearingScreen: AnyObject {
    var heard: [String] { get }
    var offMainEvents: Int { get }
    func attach(to shop: ShopAPI)
}

/// What both main-actor screens hear; each conforms to `ShopDelegate` its own way below, through
/// these methods.
@MainActor class MainActorScreen: HearingScreen {
    var heard: [String] = []
    var offMainEvents = 0
    func attach(to shop: ShopAPI) {}
    func hear(_ line: String) {
        if !isOnMainQueue() { offMainEvents += 1 }
        heard.append(line)
    }
    func shop(_ shop: ShopAPI, didLoad echo: Echo, task: UInt64) { hear("\(task) loaded \(echo.value ?? "")") }
    func shop(_ shop: ShopAPI, didFailWith error: APIError, task: UInt64) { hear("\(task) failed \(describe(error))") }
    func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask) { hear("\(task.identifier) waiting") }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {
        hear("\(task.identifier) start \(attempt)")
    }
}

/// Through an isolated conformance (SE-0470).
@MainActor final class IsolatedScreen: MainActorScreen {
    override func attach(to shop: ShopAPI) { shop.delegate = self }
}

extension IsolatedScreen: @MainActor ShopDelegate {}

/// Through a `@preconcurrency` conformance, checked at run time.
@MainActor final class PreconcurrencyScreen: MainActorScreen, @preconcurrency ShopDelegate {
    override func attach(to shop: ShopAPI) { shop.delegate = self }
}

/// A plain class, as a service object or a command-line tool writes it.
final class PlainScreen: ShopDelegate, @unchecked Sendable {
    // @unchecked: `lines` and `offMain` are only touched under `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    private var offMain = 0
    var heard: [String] { lock.withLock { lines } }
    var offMainEvents: Int { lock.withLock { offMain } }
    private func hear(_ line: String) {
        lock.withLock {
            if !isOnMainQueue() { offMain += 1 }
            lines.append(line)
        }
    }
    func shop(_ shop: ShopAPI, didLoad echo: Echo, task: UInt64) { hear("\(task) loaded \(echo.value ?? "")") }
    func shop(_ shop: ShopAPI, didFailWith error: APIError, task: UInt64) { hear("\(task) failed \(describe(error))") }
    func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask) { hear("\(task.identifier) waiting") }
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {
        hear("\(task.identifier) start \(attempt)")
    }
}

@MainActor final class PlainScreenHolder: HearingScreen {
    let screen = PlainScreen()
    var heard: [String] { screen.heard }
    var offMainEvents: Int { screen.offMainEvents }
    func attach(to shop: ShopAPI) { shop.delegate = screen }
}

@MainActor
@Suite struct MainActorDelegateTests {
    enum Shape: String, CaseIterable, CustomTestStringConvertible {
        case isolatedConformance, preconcurrencyConformance, plainClass
        var testDescription: String { rawValue }

        @MainActor func makeScreen() -> any HearingScreen {
            switch self {
            case .isolatedConformance: IsolatedScreen()
            case .preconcurrencyConformance: PreconcurrencyScreen()
            case .plainClass: PlainScreenHolder()
            }
        }
    }

    /// Two tasks in one line (the second waits) and a third that fails: every event, once, in order.
    static let expected = [
        "1 start 1", "2 waiting", "1 loaded ok", "2 start 1", "2 loaded ok", "3 start 1", "3 failed status(404)",
    ]

    private func makeShop(delivery: APIEngine.Delivery) -> (ShopAPI, TestClock) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/cart", MockTransport.Reply.json(#"{"value":"ok"}"#).after(1))
        transport.stub(nil, "/gone", .status(404))
        let engine = APIEngine(transport: transport, clock: clock, delivery: delivery, execution: .inline)
        return (ShopAPI(engine: engine), clock)
    }

    @Test(
        "main-queue delivery reaches every delegate shape on the main thread", .timeLimit(.minutes(1)),
        arguments: Shape.allCases)
    func mainQueueDelivery(shape: Shape) async {
        let (shop, clock) = makeShop(delivery: .queue(.main))
        let screen = shape.makeScreen()
        screen.attach(to: shop)
        shop.send(TestRequest("/cart", .waitUntilDone))
        shop.send(TestRequest("/cart", .waitUntilDone))
        clock.advance(by: 1)
        clock.advance(by: 1)
        shop.send(TestRequest("/gone"))
        // The events wait on the main queue behind this test; yielding lets them through (no sleep).
        while screen.heard.count < Self.expected.count, !Task.isCancelled { await Task.yield() }
        #expect(screen.heard == Self.expected)
        #expect(screen.offMainEvents == 0)
        for _ in 0..<20 { await Task.yield() }
        #expect(screen.heard.count == Self.expected.count)  // nothing after the terminal events
    }

    @Test("inline delivery in a main-actor test reaches every delegate shape", arguments: Shape.allCases)
    func inlineDeliveryInMainActorTest(shape: Shape) {
        let (shop, clock) = makeShop(delivery: .inline)
        let screen = shape.makeScreen()
        screen.attach(to: shop)
        shop.send(TestRequest("/cart", .waitUntilDone))
        shop.send(TestRequest("/cart", .waitUntilDone))
        clock.advance(by: 1)
        clock.advance(by: 1)
        shop.send(TestRequest("/gone"))
        #expect(screen.heard == Self.expected)
        #expect(screen.offMainEvents == 0)
    }

    @Test func theDelegateReadsBackAsSetAndIsHeldWeakly() {
        let (shop, clock) = makeShop(delivery: .inline)
        var screen: IsolatedScreen? = IsolatedScreen()
        shop.delegate = screen
        #expect(shop.delegate === screen)
        shop.send(TestRequest("/cart"))
        screen = nil
        #expect(shop.delegate == nil)
        clock.advance(by: 1)  // the task ends with no delegate: nothing to tell, nothing crashes

        let next = IsolatedScreen()
        shop.delegate = next
        shop.send(TestRequest("/cart"))
        clock.advance(by: 1)
        #expect(next.heard == ["2 start 1", "2 loaded ok"])
        shop.delegate = nil
        #expect(shop.delegate == nil)
    }

    @Test func managersSharingAnEngineKeepTheirOwnTypedDelegates() {
        let (first, clock) = makeShop(delivery: .inline)
        let second = ShopAPI(engine: first.engine)
        let one = IsolatedScreen()
        let other = IsolatedScreen()
        first.delegate = one
        second.delegate = other
        first.send(TestRequest("/cart"))
        second.send(TestRequest("/gone"))
        clock.advance(by: 1)
        #expect(one.heard == ["1 start 1", "1 loaded ok"])
        #expect(other.heard == ["2 start 1", "2 failed status(404)"])
    }
}
