// How many times the engine's lock is taken for one plain GET (issue 20, item 7), counted by the
// debug build's `Lock.takes`. Each test uses an engine of its own, and reads the count once the
// task has ended and nothing else uses that engine.
//
// The issue's target is 4; today's counts are pinned here so that no change adds a take unnoticed.
// Where they go, with a delegate: the send; the attempt's start (is it current, the machine keeping
// its link, the monitor, the secret names); the claim before the transport; the end; then per
// delivery run one take for the batch and one to see it is empty, and one per delegate lookup (each
// event asks the engine for the manager's delegate). The transport's handle and the check before
// the manager's hooks build the response took two more until issue 42: they are the attempt's own
// lock's now (its link, `AttemptLink`: the handle, the first answer, the check), not the engine's.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

@Suite("The engine's lock: takes per request", .timeLimit(.minutes(1)))
struct LockTakesTests {
    /// Sends one GET on an engine of its own, with a delegate or awaited, and returns the lock
    /// takes the request cost.
    private func takes(execution: APIEngine.Execution, awaited: Bool) async throws -> Int {
        let transport = MockTransport()
        transport.stub(nil, "/ok", .json(#"{"value":"ok"}"#))
        let manager = TestManager(
            engine: APIEngine(transport: transport, delivery: .inline, execution: execution, defaultHeaders: .none))
        let recorder = EventRecorder()
        manager.delegate = recorder
        let before = manager.engine.state.takes
        if awaited {
            _ = try await manager.response(for: TestRequest("/ok"))
        } else {
            manager.send(TestRequest("/ok"))
        }
        // The recorder's lock is not the engine's: waiting for the terminal event takes none.
        while recorder.events.last?.hasSuffix("finished") != true { await Task.yield() }
        return await Self.takesOnceStill(manager.engine.state, since: before)
    }

    /// The takes of `state`'s lock since `before`, read once the engine has stopped taking it: on the lanes
    /// the delivery run still looks at its empty batch after the delegate had the terminal event,
    /// on another thread. Read under the lock (no race), until one read follows another with only
    /// its own take between them; the reads' own takes are not counted.
    private static func takesOnceStill<Value>(_ state: LockedState<Value>, since before: Int) async -> Int {
        var reads = 1
        var last = state.takes
        for _ in 0..<10_000 {
            await Task.yield()
            let now = state.takes
            reads += 1
            if now == last + 1 { return now - before - reads }
            last = now
        }
        return last - before - reads
    }

    @Test func aPlainGetInlineWithADelegate() async throws {
        let count = try await takes(execution: .inline, awaited: false)
        print("lock takes, inline, delegate: \(count)")
        #expect(count <= 8)
    }

    @Test func aPlainGetInlineAwaited() async throws {
        let count = try await takes(execution: .inline, awaited: true)
        print("lock takes, inline, awaited: \(count)")
        #expect(count <= 8)
    }

    @Test func aPlainGetOnTheLanesWithADelegate() async throws {
        let count = try await takes(execution: .concurrent(), awaited: false)
        print("lock takes, lanes, delegate: \(count)")
        #expect(count <= 11)
    }
}
