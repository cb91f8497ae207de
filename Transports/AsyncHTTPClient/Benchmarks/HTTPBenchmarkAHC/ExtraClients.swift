import APIManagerKit
import APIManagerKitAsyncHTTPClient
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// `ahc`: AsyncHTTPClient alone, its whole body collected (`execute(request:)`), as an app using it
/// directly would; `managerAHC`: a manager (on its work queue) over `AsyncHTTPClientTransport`, a new
/// manager per run on one transport, as `manager` does over URLSessionTransport; `openapi`: the client
/// swift-openapi-generator made from `OpenAPI/openapi.yaml`, on swift-openapi-async-http-client, what a
/// server user would pick instead (each body collected as bytes, as the others do).
///
/// Like for like (issue 29): `ahcLike` is raw AsyncHTTPClient on a client configured as the
/// transport configures its own (redirects off, decompression on, no connection retry) with
/// AsyncHTTPClient's default tracing (the no-op tracer), sending the engine's two default headers
/// (`User-Agent`, `Accept-Language`); `managerAHCLike` is the manager (default engine) on
/// `AsyncHTTPClientTransport(client:)` given that same client; `managerAHCLikeInline` the same with
/// `execution: .inline`. `ahcNoTracer` is `ahc` on a client whose tracer is `nil`.
func extraClients() -> [String: (URL, @escaping @Sendable (Bool) -> Void) -> Void] {
    [
        "ahc": ahcClient.send, "managerAHC": managerAHCClient.send, "managerAHCInline": inlineManagerAHCClient.send,
        "openapi": openAPIClient.send, "ahcLike": ahcLikeClient.send, "managerAHCLike": managerAHCLikeClient.send,
        "managerAHCLikeInline": inlineManagerAHCLikeClient.send, "ahcNoTracer": ahcNoTracerClient.send,
    ]
}

/// The client `ahcLike` and `managerAHCLike` share: configured as the transport's own, tracing left
/// at AsyncHTTPClient's default.
let likeClient: HTTPClient = {
    var configuration = HTTPClient.Configuration()
    configuration.redirectConfiguration = .disallow
    configuration.decompression = .enabled(limit: .none)
    configuration.connectionPool.retryConnectionEstablishment = false
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}()

/// Raw AsyncHTTPClient on `client`, sending `headers` with each request.
final class HeaderedAHCClient: Sendable {
    let client: HTTPClient
    let headers: [(String, String)]

    init(client: HTTPClient, headers: [String: String]) {
        self.client = client
        self.headers = headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        guard var request = try? HTTPClient.Request(url: url) else { return done(false) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        client.execute(request: request).whenComplete { result in
            if case .success(let response) = result { done(response.status.code == 200) } else { done(false) }
        }
    }
}

let ahcLikeClient = HeaderedAHCClient(client: likeClient, headers: APIEngine.DefaultHeaders.standard.fields)
let ahcNoTracerClient: HeaderedAHCClient = {
    var configuration = HTTPClient.Configuration()
    configuration.tracing.tracer = nil
    return HeaderedAHCClient(
        client: HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration), headers: [:])
}()
let managerAHCLikeClient = ManagerAHCClient(
    transport: APIManagerKitAsyncHTTPClient.AsyncHTTPClientTransport(client: likeClient)
) { .shared }
let inlineManagerAHCLikeClient = ManagerAHCClient(
    transport: APIManagerKitAsyncHTTPClient.AsyncHTTPClientTransport(client: likeClient)
) { .inline }

final class RawAHCClient: Sendable {
    let client = HTTPClient(eventLoopGroupProvider: .singleton)

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        guard let request = try? HTTPClient.Request(url: url) else { return done(false) }
        client.execute(request: request).whenComplete { result in
            if case .success(let response) = result { done(response.status.code == 200) } else { done(false) }
        }
    }
}

final class ManagerAHCClient: @unchecked Sendable {
    // @unchecked: `current` is replaced only between runs, on the sending thread, before the first
    // request of a run is sent.
    let transport: APIManagerKitAsyncHTTPClient.AsyncHTTPClientTransport
    let execution: @Sendable () -> APIEngine.Execution
    private var current: (api: FileAPI, run: Int)?

    init(
        transport: APIManagerKitAsyncHTTPClient.AsyncHTTPClientTransport = .init(),
        execution: @escaping @Sendable () -> APIEngine.Execution
    ) {
        self.transport = transport
        self.execution = execution
    }

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        if current?.run != currentRun {
            current = (FileAPI(transport: transport, execution: execution(), done: done), currentRun)
        }
        current?.api.send(FileRequest(url: url))
    }
}

let ahcClient = RawAHCClient()
let managerAHCClient = ManagerAHCClient { .shared }
let inlineManagerAHCClient = ManagerAHCClient { .inline }

/// The generated client on a client of its own (as `ahc` has), one per server address.
final class GeneratedClient: Sendable {
    let httpClient = HTTPClient(eventLoopGroupProvider: .singleton)
    private let clients = NIOLockedValueBox<[String: Client]>([:])

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return done(false) }
        let isLarge = parts.path.hasSuffix("large.bin")
        parts.path = ""
        guard let server = parts.url else { return done(false) }
        let client = clients.withLockedValue { clients in
            if let client = clients[server.absoluteString] { return client }
            let client = Client(
                serverURL: server,
                transport: OpenAPIAsyncHTTPClient.AsyncHTTPClientTransport(configuration: .init(client: httpClient)))
            clients[server.absoluteString] = client
            return client
        }
        Task {
            do {
                let body: HTTPBody
                if isLarge {
                    guard case .ok(let ok) = try await client.getLarge() else { return done(false) }
                    body = try ok.body.any
                } else {
                    guard case .ok(let ok) = try await client.getSmall() else { return done(false) }
                    body = try ok.body.any
                }
                done(!(try await Data(collecting: body, upTo: 1 << 20)).isEmpty)
            } catch {
                done(false)
            }
        }
    }
}

let openAPIClient = GeneratedClient()
