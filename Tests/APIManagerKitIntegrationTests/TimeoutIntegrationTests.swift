import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `timeout` is an idle timeout and `totalTimeout` bounds the whole attempt (the corrections issue,
/// item 11), on the transport under test, scaled down: an idle limit of 4 s and bytes every 0.25 s
/// for 6 s run to the end; a body that stops for 6 s fails at its idle limit of 2 s. (Idle limits
/// of 1 s, then of 2 s for the bodies that keep coming, left too little margin under
/// ThreadSanitizer beside a release build on 2 cores, where URLSession's delegate queue on Linux
/// handed parts over seconds late; the tests run one at a time for the same reason.)
@Suite(
    "Integration: idle and total timeouts", .enabled(if: Server.isAvailable, Server.skipReason),
    .timeLimit(.minutes(2)), .serialized)
struct TimeoutIntegrationTests {
    struct SlowRequest: APIRequest {
        var url = Server.url
        var path: String
        var parameters: APIParameters = .none
        var timeout: TimeInterval = 2
        var totalTimeout: TimeInterval?
        var download: APIDownload?
    }

    final class Slow: APIManager, @unchecked Sendable {
        typealias Request = SlowRequest
        typealias Response = APIRawResponse
        let engine = APIEngine(transport: Shared.transport, delivery: .inline)
    }

    @Test func aStreamWhoseBytesKeepComingRunsPastItsIdleLimit() async throws {
        let request = SlowRequest(
            path: "fixture/sse", parameters: .query(["count": 24, "interval": 0.25]), timeout: 4)
        let started = Date()
        var ids: [String] = []
        for try await event in Slow().events(for: request) { ids.append(event.id ?? "-") }
        #expect(ids == (1...24).map(String.init))
        #expect(Date().timeIntervalSince(started) > 5.5, "it ran for about 6 s with an idle limit of 4 s")
    }

    @Test func aDownloadWhoseBytesKeepComingRunsPastItsIdleLimit() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("TimeoutIntegrationTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("slow.bin")
        let response = try await Slow().response(
            for: SlowRequest(
                path: "fixture/trickle", parameters: .query(["count": 25, "interval": 0.25]), timeout: 4,
                download: APIDownload(to: destination)))
        #expect(response.fileURL == destination)
        #expect((try? FileManager.default.attributesOfItem(atPath: destination.path))?[.size] as? Int == 2500)
    }

    @Test func aBodyThatStopsFailsAtItsIdleLimit() async {
        let started = Date()
        let error = await failure { () async throws(APIError) in
            try await Slow().response(
                for: SlowRequest(
                    path: "fixture/trickle", parameters: .query(["count": 3, "interval": 0.1, "stall": 6])))
        }
        #expect((error?.underlyingError as? URLError)?.code == .timedOut, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(started) < 5.5, "about 2 s after the last byte, not at the end of the stall")
    }

    @Test func aTotalTimeoutEndsAnAttemptWhoseBytesKeepComing() async {
        let started = Date()
        let error = await failure { () async throws(APIError) in
            try await Slow().response(
                for: SlowRequest(
                    path: "fixture/trickle", parameters: .query(["count": 20, "interval": 0.3]), timeout: 5,
                    totalTimeout: 1))
        }
        #expect((error?.underlyingError as? URLError)?.code == .timedOut, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(started) < 4, "at about 1 s, not after 6 s of bytes")
    }
}
