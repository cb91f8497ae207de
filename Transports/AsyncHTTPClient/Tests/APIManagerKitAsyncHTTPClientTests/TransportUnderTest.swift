import APIManagerKit
import APIManagerKitAsyncHTTPClient

/// The transport this copy of the integration suite runs on: the suite's files are shared (the
/// `Shared` link) with the main package, where this file names `URLSessionTransport`.
enum TransportUnderTest {
    typealias Transport = AsyncHTTPClientTransport
    static let name = "AsyncHTTPClientTransport"
    /// The durable line's child process on this transport (`DurableLineChild/`, the main package's
    /// `Tests/DurableLineChild` with this package's transport).
    static let durableLineChild = "DurableLineChildAHC"

    /// Whether a compressed body refused at the limit stays within the limit's memory.
    static let boundsCompressedBodyMemory = true
    /// Whether a kept-alive connection with bytes nobody asked for is closed instead of reused.
    static let refusesDesynchronizedConnections = true
    /// Whether a streamed body's consumer holds the transport back (backpressure).
    static let holdsStreamedBodiesBack = true
    /// Whether a stream body of a known length goes with its `Content-Length`.
    static let sendsStreamLengths = true
    /// Whether a file upload redirected with a `307` or `308` is sent again.
    static let resendsFileBodiesOnRedirect = true

    static func make() -> Transport { AsyncHTTPClientTransport() }
}
