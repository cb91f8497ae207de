// The code samples of Transports/AsyncHTTPClient/README.md and of the "Talking HTTP" article's
// AsyncHTTPClient section, compiled and run. Keep them in step.
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
