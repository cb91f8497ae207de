import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The child process of ``DurableLineIntegrationTests``.
enum DurableLineChild {
    /// Its executable, beside the test bundle; `nil` when it was not built.
    static let url: URL? = {
        let directories = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0])]
            .map { $0.deletingLastPathComponent() }
        return directories.map { $0.appendingPathComponent(TransportUnderTest.durableLineChild) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()
}

/// The durable line across a killed process: a child (`Tests/DurableLineChild`, on this suite's
/// transport) sends three mutations into a durable line and is killed with SIGKILL at a step of the
/// second; started again, it replays what its line kept. The server applies a mutation once per
/// idempotency key and records every arrival.
@Suite(
    "Integration: a durable line across a killed process",
    .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(3)))
struct DurableLineIntegrationTests {
    struct Log: Decodable {
        struct Entry: Decodable, Equatable {
            let name: String
            let key: String
        }
        let arrivals: [Entry]
        let applied: [Entry]
    }

    /// Runs the child to its end (or its own SIGKILL); `killWhen` is polled while it runs, and kills
    /// it when it says so. Returns how it ended: its exit status, or the signal that killed it.
    func run(
        _ arguments: [String], hold: String? = nil, output: Pipe? = nil, killWhen: (() async -> Bool)? = nil
    ) async throws -> Process.TerminationReason {
        let process = Process()
        process.executableURL = try #require(
            DurableLineChild.url, "the child (\(TransportUnderTest.durableLineChild)) is built beside the tests")
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        if let hold { environment["DURABLE_CHILD_HOLD"] = hold }
        process.environment = environment
        process.standardOutput = output ?? FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning, Date() < deadline {
            if let killWhen, await killWhen() {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        process.waitUntilExit()
        return process.terminationReason
    }

    func log(of group: String) async throws -> Log {
        let url = Server.url.appendingPathComponent("fixture/mutation-log/\(group)")
        let (data, _) = try await URLSession.shared.data(from: url)
        return try JSONDecoder().decode(Log.self, from: data)
    }

    @Test(arguments: ["before-write", "after-write", "mid-send", "after-answer"])
    func eachMutationIsAppliedOnceAndInOrderWhateverStepTheProcessWasKilledAt(step: String) async throws {
        let group = "\(step)-\(UUID().uuidString)"
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("durable-child-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: store) }
        let base = Server.url.absoluteString
        // The first run: killed at `step` of the second mutation.
        let first: Process.TerminationReason
        if step == "mid-send" {
            first = try await run([base, store.path, group, "one,two,three", "none"], hold: "two") {
                (try? await self.log(of: group).arrivals.contains { $0.name == "two" }) ?? false
            }
        } else {
            first = try await run([base, store.path, group, "one,two,three", "\(step):two"])
        }
        #expect(first == .uncaughtSignal, "the first run was killed")
        // The second run replays what the first left, and sends nothing new.
        let second = try await run([base, store.path, group, "", "none"])
        #expect(second == .exit)
        let log = try await log(of: group)
        // Killed while the second was written, the app never had it: only the first exists.
        let expected = step == "before-write" ? ["one"] : ["one", "two", "three"]
        #expect(log.applied.map(\.name) == expected, "\(log.arrivals)")
        for name in expected {
            let keys = Set(log.arrivals.filter { $0.name == name }.map(\.key))
            #expect(keys.count == 1 && keys.first?.isEmpty == false, "\(name) always came with one key: \(keys)")
        }
        if step == "mid-send" || step == "after-answer" {
            #expect(log.arrivals.filter { $0.name == "two" }.count == 2, "the second was sent again, as a repeat")
        }
        let left =
            (try? FileManager.default.subpathsOfDirectory(atPath: store.path))?
            .filter { $0.hasSuffix(".task") } ?? []
        #expect(left.isEmpty, "no record is left: \(left)")
    }

    @Test func aSecondProcessOpeningTheSameLineIsRefusedWithAClearErrorAndSendsNothing() async throws {
        let group = "two-processes-\(UUID().uuidString)"
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("durable-child-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: store) }
        let base = Server.url.absoluteString
        // The first process holds the line while the server holds its mutation.
        async let first = run([base, store.path, group, "one", "none"], hold: "one")
        var arrived = false
        for _ in 0..<500 where !arrived {
            arrived = (try? await log(of: group).arrivals.contains { $0.name == "one" }) ?? false
            if !arrived { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(arrived)
        let output = Pipe()
        let second = try await run([base, store.path, group, "two", "none"], output: output)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(second == .exit)
        #expect(printed.contains("is open elsewhere"), "\(printed)")
        #expect(try await first == .exit)
        let log = try await log(of: group)
        #expect(log.applied.map(\.name) == ["one"], "the second process sent nothing")
    }
}
