import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A live session recorded as HAR against the real server, written where the test script checks it
/// (`APIMANAGERKIT_HAR_DIR`: the HAR 1.2 structure and a third-party reader, Scripts/check-har.py),
/// then replayed on `MockTransport` with the same answers.
@Suite("Integration: a session recorded as HAR and replayed", .enabled(if: Server.isAvailable, Server.skipReason))
struct HARIntegrationTests {
    static func requests() -> [HTTPRequest] {
        var get = HTTPRequest("get", parameters: .query(["page": 2]))
        get.headers = ["X-API-Key": "key-that-must-not-be-written"]
        let post = HTTPRequest(
            "status/201", method: .post, parameters: .json(["sku": "tea", "password": "hunter2-not-written"]))
        var missing = HTTPRequest("status/404")
        missing.retryPolicy = APIRetryPolicy(maxAttempts: 1)
        return [get, post, missing]
    }

    /// Sends the session's requests; their raw answers (a refusal's too).
    static func run(on engine: APIEngine) async -> [APIRawResponse?] {
        let client = Client<APIRawResponse>(engine)
        var answers: [APIRawResponse?] = []
        for request in requests() {
            do {
                answers.append(try await client.response(for: request))
            } catch {
                answers.append(error.response)
            }
        }
        return answers
    }

    @Test func aLiveSessionIsWrittenAsHARAndReplaysWithTheSameAnswers() async throws {
        let recorder = APIEngine.HARRecorder()
        var configuration = APIEngine.Configuration()
        configuration.transport = Shared.transport
        configuration.delivery = .inline
        configuration.observers = [recorder]
        let live = await Self.run(on: APIEngine(configuration: configuration))
        #expect(live.map { $0?.statusCode } == [200, 201, 404])

        let folder =
            ProcessInfo.processInfo.environment["APIMANAGERKIT_HAR_DIR"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("har-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("\(TransportUnderTest.name).har")
        try recorder.write(to: file)
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(!text.contains("key-that-must-not-be-written"))
        #expect(!text.contains("hunter2-not-written"))
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int == 0o600)
        let har = try APIEngine.HAR.read(from: file)
        #expect(har.log.entries.map(\.response.status) == [200, 201, 404])
        #expect(har.log.entries.allSatisfy { $0.time > 0 && $0.request.url.hasPrefix(Server.url.absoluteString) })

        // Replayed on the virtual clock: the same statuses and bodies, nothing on the network.
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.replay(har, timing: .immediate)
        configuration.transport = transport
        configuration.clock = clock
        configuration.observers = []
        let replayed = await Self.run(on: APIEngine(configuration: configuration))
        #expect(replayed.map { $0?.statusCode } == [200, 201, 404])
        let liveEcho = try JSONDecoder().decode(Echoed.self, from: try #require(live.first??.body))
        let replayedEcho = try JSONDecoder().decode(Echoed.self, from: try #require(replayed.first??.body))
        #expect(replayedEcho.url == liveEcho.url)
        #expect(replayedEcho.args == liveEcho.args)
        #expect(replayedEcho.header("X-API-Key") == "***")  // the echo of a secret is redacted too
        #expect(transport.unusedStubs.isEmpty)

        // New episodes: what the recording lacks goes to the server and is recorded after it.
        let episodes = MockTransport(clock: clock)
        let newEpisodes = APIEngine.HARRecorder()
        episodes.replay(har, timing: .immediate, sendingMissesWith: Shared.transport, into: newEpisodes)
        configuration.transport = episodes
        let client = Client<Echoed>(APIEngine(configuration: configuration))
        let third = try await client.response(for: HTTPRequest("get", parameters: .query(["page": 3])))
        #expect(third.args?["page"] == .string("3"))
        #expect(newEpisodes.entries.map(\.request.url) == [Server.url.absoluteString + "/get?page=3"])
        try newEpisodes.write(to: file, after: har)
        #expect(try APIEngine.HAR.read(from: file).log.entries.count == 4)
    }
}
