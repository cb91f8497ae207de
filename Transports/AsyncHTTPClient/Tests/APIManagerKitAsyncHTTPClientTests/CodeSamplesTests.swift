// The code samples of Transports/AsyncHTTPClient/README.md, of the "Talking HTTP" article's
// AsyncHTTPClient section and of the "Trust and pinning" article's AsyncHTTPClient sample, compiled
// and run. Keep them in step.
import APIManagerKit
import APIManagerKitAsyncHTTPClient
import Foundation
import Testing

@Suite("AsyncHTTPClientTransport: the documented samples")
struct CodeSamplesTests {
    struct Ping: APIRequest {
        var url: URL
    }

    final class PingAPI: APIManager {
        typealias Request = Ping
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    static func makeEngine(trust: APIEngine.Trust) throws -> APIEngine {
        var configuration = APIEngine.Configuration()
        configuration.transport = try AsyncHTTPClientTransport(trust: trust)
        let engine = APIEngine(configuration: configuration)
        return engine
    }

    @Test func anEngineIsMadeOnATransportWithATrust() async throws {
        let pin = try APIEngine.Trust.Pin("sha256/lBugbu5d1Tx/bzYw98abxzAd3CqpY2U6E7bMMRiu/UI=")
        let engine = try Self.makeEngine(trust: APIEngine.Trust(hosts: ["api.bank.example": .init(pins: [pin])]))
        let transport = try #require(engine.transport as? AsyncHTTPClientTransport)
        #expect(transport.trust.rule(forHost: "api.bank.example").pins == [pin])
        try await transport.shutdown()
    }

    @Test func aTransportIsMadeSharedByEnginesAndShutDown() async throws {
        let transport = AsyncHTTPClientTransport()  // owns an HTTPClient on the shared event loops
        let engine = APIEngine(transport: transport)  // share one transport between engines
        let api = PingAPI(engine: engine)
        try await transport.shutdown()  // when no engine uses it any more
        // Once shut down, a request fails as a transport error rather than hanging.
        let error = await #expect(throws: APIError.self) {
            try await api.response(for: Ping(url: URL(string: "http://127.0.0.1:9/ping")!))
        }
        #expect(error?.underlyingError is URLError)
        #expect(transport.requestsInFlight == 0)
    }
}
