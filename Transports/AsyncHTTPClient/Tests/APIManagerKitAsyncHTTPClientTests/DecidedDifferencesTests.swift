import APIManagerKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where AsyncHTTPClientTransport and URLSessionTransport differ on purpose (the adapter's README
/// lists them); everything else is the shared integration suite.
@Suite("AsyncHTTPClientTransport: decided differences", .enabled(if: Server.isAvailable, Server.skipReason))
struct DecidedDifferencesTests {
    @Test func aBrotliBodyIsNotDecodedAndFailsAsSuch() async {
        // URLSession on Linux decodes br through libcurl; SwiftNIO decodes gzip and deflate only, and
        // the transport asks for those alone. A server that sends br anyway gets a clear error.
        let error = await failure { () async throws(APIError) in
            try await Client<APIRawResponse>().response(for: HTTPRequest("brotli"))
        }
        #expect((error?.underlyingError as? URLError)?.code == .cannotDecodeContentData)
    }

    @Test func theTransportAsksForGzipAndDeflateOnly() async throws {
        let echoed = try await Client<Echoed>().response(for: HTTPRequest("headers"))
        #expect(echoed.header("Accept-Encoding") == "deflate, gzip")
    }
}
