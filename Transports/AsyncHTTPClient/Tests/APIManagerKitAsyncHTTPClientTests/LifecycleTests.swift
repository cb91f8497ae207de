import APIManagerKit
import AsyncHTTPClient
import Foundation
import InMemoryTracing
import Testing

@testable import APIManagerKitAsyncHTTPClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends one request and waits for its answer.
private func answer(of transport: AsyncHTTPClientTransport, _ url: URL) async -> Result<APIRawResponse, any Error> {
    await withCheckedContinuation { continuation in
        _ = transport.send(URLRequest(url: url)) { continuation.resume(returning: $0) }
    }
}

@Suite("AsyncHTTPClientTransport: the client's lifecycle")
struct LifecycleTests {
    @Test func aTransportReleasedWithoutShutdownShutsItsClientDownItself() {
        // AsyncHTTPClient stops a debug build whose client is released unshut: this must not.
        for _ in 0..<3 { _ = AsyncHTTPClientTransport() }
    }

    @Test func afterShutdownARequestFailsWithTheClientsError() async throws {
        let transport = AsyncHTTPClientTransport()
        try await transport.shutdown()
        try await transport.shutdown()  // a second call does nothing
        let result = await answer(of: transport, URL(string: "http://127.0.0.1:9/never")!)
        guard case .failure(let error as URLError) = result else {
            Issue.record("expected a URLError, got \(result)")
            return
        }
        #expect(error.userInfo[NSUnderlyingErrorKey] as? HTTPClientError == .alreadyShutdown)
        #expect(transport.requestsInFlight == 0)
    }

    /// No tracer is bootstrapped in the tests: the transport's own client builds no span that goes
    /// nowhere; a tracer given in the configuration is kept.
    @Test func itsOwnClientLeavesTheNoOpTracerOutAndKeepsAGivenOne() {
        #expect(HTTPClient.Configuration().tracing.tracer != nil, "AsyncHTTPClient's default: the no-op tracer")
        #expect(AsyncHTTPClientTransport.own(HTTPClient.Configuration()).tracing.tracer == nil)
        var configuration = HTTPClient.Configuration()
        configuration.tracing.tracer = InMemoryTracer()
        #expect(AsyncHTTPClientTransport.own(configuration).tracing.tracer is InMemoryTracer)
    }

    @Test func aBorrowedClientIsNeverShutDownByTheTransport() async throws {
        // A borrowed client keeps its own settings: AsyncHTTPClient retries a refused connection
        // until its connect timeout (10 s unless set) before it reports it.
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .milliseconds(300)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let transport = AsyncHTTPClientTransport(client: client)
        try await transport.shutdown()
        // Still usable: a refused connection, not a shut-down client.
        let result = await answer(of: transport, URL(string: "http://127.0.0.1:9/closed")!)
        guard case .failure(let error as URLError) = result else {
            Issue.record("expected a URLError, got \(result)")
            return
        }
        #expect(error.code == .cannotConnectToHost)
        try await client.shutdown()
    }
}
