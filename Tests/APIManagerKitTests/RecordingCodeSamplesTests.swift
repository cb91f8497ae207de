// The samples of the Testing article's "Replaying a recorded session", compiled and run here
// (Scripts/check-doc-counts.py fails when one is not here, word for word). The recording,
// Recordings/cart.har, is the Playground's cart story recorded against the integration server:
//   swift run Playground --story cart --base-url "$APIMANAGERKIT_TEST_SERVER" --record Tests/APIManagerKitTests/Recordings/cart.har
import APIManagerKit
import APIManagerKitTesting
import Foundation
import Testing

enum Recordings {
    static let cart = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Recordings/cart.har")
}

struct RecordedCartEdit: APIClient.Endpoint {
    typealias Response = APIRawResponse
    var url: URL
    var concurrencyPolicy: APIConcurrencyPolicy { .waitUntilDone }
}

@Test func theCartRecordedAgainstTheServerReplaysOneEditAtATime() throws {
    let recording = try APIEngine.HAR.read(from: Recordings.cart)
    let clock = TestClock()
    let transport = MockTransport(clock: clock)
    transport.replay(recording, timing: .recorded)
    let client = APIClient(engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline))
    let server = try #require(URL(string: recording.log.entries[0].request.url))

    let edits = (1...3).map { _ in client.send(RecordedCartEdit(url: server)) }
    clock.advance(by: 0.2)
    #expect(transport.records.count == 1)  // one edit at a time: waitUntilDone
    clock.advance(by: 1)
    #expect(edits.allSatisfy { $0.state == .finished })
    let sent = transport.records.map { Int(($0.sentAt * 1000).rounded()) }
    #expect(zip(sent, sent.dropFirst()).allSatisfy { $1 - $0 >= 300 })  // each after the last ended
    #expect(transport.unusedStubs.isEmpty)  // every recorded exchange was asked for
}
