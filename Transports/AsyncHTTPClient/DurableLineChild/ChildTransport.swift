import APIManagerKit
import APIManagerKitAsyncHTTPClient

/// The transport the child sends with: AsyncHTTPClient's (the main package's child uses URLSession's).
enum ChildTransport {
    static func make() -> any APITransport { AsyncHTTPClientTransport() }
}
