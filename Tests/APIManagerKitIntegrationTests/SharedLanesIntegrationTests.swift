import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

/// The corrections issue, item 28, on real threads: 1,000 engines alive at once, each made with the
/// default execution (the README's `init(engine: APIEngine = APIEngine())` pattern), build their
/// responses on the process's shared lanes; the process keeps about as many threads as there are
/// lanes. Each engine with lanes of its own drove a process to 256 threads. No server needed.
@Suite("Integration: shared work lanes", .timeLimit(.minutes(2)))
struct SharedLanesIntegrationTests {
    struct ItemRequest: APIRequest {
        var url = URL(string: "https://api.test")!
        var path = "/item"
    }

    struct Item: APIResponse, Decodable {
        let value: String
    }

    final class Items: APIManager {
        typealias Request = ItemRequest
        typealias Response = Item
        let engine: APIEngine
        init(engine: APIEngine = APIEngine(transport: SharedLanesIntegrationTests.transport, delivery: .inline)) {
            self.engine = engine
        }
    }

    /// Every answer 50 ms after its request, on real time: they all come at about once.
    static let transport: MockTransport = {
        let transport = MockTransport(clock: DispatchClock())
        transport.stub(nil, "/item", MockTransport.Reply.json(#"{"value":"ok"}"#).after(0.05))
        return transport
    }()

    /// The threads of this process, as Linux counts them; `nil` elsewhere.
    private static func threadCount() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        return status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
            .flatMap { Int($0.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) }
    }

    @Test func aThousandEnginesAliveAtOnceKeepTheThreadCountNearTheLanes() async throws {
        guard let before = Self.threadCount() else { return }
        let managers = (0..<1_000).map { _ in Items() }
        var most = before
        let answered = try await withThrowingTaskGroup(of: Int.self) { group in
            for manager in managers {
                group.addTask { try await manager.response(for: ItemRequest()).value == "ok" ? 1 : 0 }
            }
            var count = 0
            for try await one in group {
                count += one
                most = max(most, Self.threadCount() ?? most)
            }
            return count
        }
        #expect(answered == 1_000)
        let lanes = APIEngine.WorkLanes.shared.queues.count
        // The rest of the process (the test runner, the clock, other suites) has threads too: the
        // bound is loose, and far below what a thousand sets of lanes took (hundreds).
        #expect(most - before <= lanes + 32, "\(most - before) threads more for 1,000 engines; \(lanes) lanes")
        withExtendedLifetime(managers) {}
    }
}
