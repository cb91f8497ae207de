import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transports `--transport` can name for `--base-url`: URLSession's here. The AsyncHTTPClient
/// transport's package builds the Playground again (`PlaygroundAHC`, linking these sources) with a
/// version of this file that adds `ahc`.
enum LiveTransports {
    static let names = ["urlsession"]

    static func make(_ name: String) -> (any APITransport)? {
        name == "urlsession" ? URLSessionTransport() : nil
    }
}
