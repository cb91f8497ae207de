import APIManagerKit
import APIManagerKitAsyncHTTPClient
import AsyncHTTPClient
import Foundation
import NIOCore

/// `ahc`: AsyncHTTPClient alone, its whole body collected (`execute(request:)`), as an app using it
/// directly would; `managerAHC`: a manager (on its work queue) over `AsyncHTTPClientTransport`, a new
/// manager per run on one transport, as `manager` does over URLSessionTransport.
func extraClients() -> [String: (URL, @escaping @Sendable (Bool) -> Void) -> Void] {
    [
        "ahc": ahcClient.send, "managerAHC": managerAHCClient.send, "managerAHCInline": inlineManagerAHCClient.send,
    ]
}

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
    let transport = AsyncHTTPClientTransport()
    let execution: @Sendable () -> APIExecution
    private var current: (api: FileAPI, run: Int)?

    init(execution: @escaping @Sendable () -> APIExecution) { self.execution = execution }

    func send(_ url: URL, done: @escaping @Sendable (Bool) -> Void) {
        if current?.run != currentRun {
            current = (FileAPI(transport: transport, execution: execution(), done: done), currentRun)
        }
        current?.api.send(FileRequest(url: url))
    }
}

let ahcClient = RawAHCClient()
let managerAHCClient = ManagerAHCClient { .concurrent() }
let inlineManagerAHCClient = ManagerAHCClient { .inline }
