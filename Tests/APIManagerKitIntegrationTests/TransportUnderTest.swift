import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport this copy of the integration suite runs on. The suite's other files are shared
/// with `Transports/AsyncHTTPClient`, whose test target brings its own version of this file.
enum TransportUnderTest {
    typealias Transport = URLSessionTransport
    static let name = "URLSessionTransport"
    /// The durable line's child process on this transport (`Tests/DurableLineChild`).
    static let durableLineChild = "DurableLineChild"

    /// Whether a compressed body refused at the limit stays within the limit's memory. Not on
    /// Linux: libcurl inflates the whole body and FoundationNetworking queues every chunk for the
    /// delegate before the transport can stop it.
    #if canImport(FoundationNetworking)
    static let boundsCompressedBodyMemory = false
    #else
    static let boundsCompressedBodyMemory = true
    #endif
    /// Whether a kept-alive connection with bytes nobody asked for is closed instead of reused. Not
    /// on Linux: libcurl reuses it and reads those bytes as the next answer.
    #if canImport(FoundationNetworking)
    static let refusesDesynchronizedConnections = false
    #else
    static let refusesDesynchronizedConnections = true
    #endif

    /// Whether a streamed body's consumer holds the transport back (backpressure). Not on Linux:
    /// suspending a running task does not stop FoundationNetworking from reading and queueing the
    /// rest of the body for the delegate (the stream then keeps what is past its memory limit in a
    /// temporary file).
    #if canImport(FoundationNetworking)
    static let holdsStreamedBodiesBack = false
    #else
    static let holdsStreamedBodiesBack = true
    #endif

    /// Whether a stream body of a known length goes with its `Content-Length`. Not on Linux:
    /// FoundationNetworking sends every stream chunked.
    #if canImport(FoundationNetworking)
    static let sendsStreamLengths = false
    #else
    static let sendsStreamLengths = true
    #endif

    /// Whether a file upload redirected with a `307` or `308` is sent again. Not on Linux:
    /// FoundationNetworking sends the redirected request without its body and waits, so the
    /// transport refuses such a redirect with a typed error.
    #if canImport(FoundationNetworking)
    static let resendsFileBodiesOnRedirect = false
    #else
    static let resendsFileBodiesOnRedirect = true
    #endif

    static func make() -> Transport { URLSessionTransport() }
}
