import Foundation

/// What a transport received for one attempt: status, headers and body, before any decoding.
public struct APIRawResponse: Sendable, Hashable, Codable {
    /// The HTTP status code.
    public var statusCode: Int
    /// The response headers. Look them up with ``value(forHeader:)``, which ignores case.
    public var headers: [String: String]
    /// The response body; empty when the server sent none.
    public var body: Data
    /// The URL that answered, after redirects; `nil` when the transport does not know it.
    public var url: URL?

    public init(statusCode: Int, headers: [String: String] = [:], body: Data = Data(), url: URL? = nil) {
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
        self.url = url
    }

    /// The value of a header, matched without regard to case (RFC 9110 §5.1).
    public func value(forHeader name: String) -> String? {
        if let exact = headers[name] { return exact }
        let lowered = name.lowercased()
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}
