import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one endpoint needs to be called. Only ``url`` is required; every other property has a
/// default in an extension.
///
/// ```swift
/// struct WeatherRequest: APIRequest {
///     let url = URL(string: "https://api.example.com/weather")!
/// }
/// ```
public protocol APIRequest: Sendable {
    /// The endpoint's URL, or its base URL when ``path`` is not empty.
    var url: URL { get }
    /// A path appended to ``url``. `""` unless overridden.
    var path: String { get }
    /// The HTTP method. `.get` unless overridden.
    var method: HTTPMethod { get }
    /// Extra request headers. Empty unless overridden.
    var headers: [String: String] { get }
    /// The request body. `nil` unless overridden.
    var body: APIRequestBody? { get }
    /// How long one attempt may wait for data before the transport gives up, in seconds.
    /// `60` unless overridden.
    var timeout: TimeInterval { get }
    /// How this task treats the other in-flight tasks of its scope. `.default` unless overridden.
    var concurrencyPolicy: APIConcurrencyPolicy { get }
    /// Narrows the policy to the tasks sharing this key; tasks with different keys never interact.
    /// `nil` (one scope for the whole manager) unless overridden.
    var concurrencyScope: String? { get }
    /// Whether and how a failed attempt is retried. `nil` (no retry) unless overridden.
    var retryPolicy: APIRetryPolicy? { get }
    /// The longest the task may take, all attempts and retry delays included, counted from
    /// ``APIManager/send(_:)``; past it the task fails with ``APIError/timedOut(deadline:attempts:)``.
    /// `nil` (no deadline) unless overridden.
    var deadline: TimeInterval? { get }
    /// The statuses the default ``APIManager/response(for:from:)`` accepts; any other fails the
    /// attempt with ``APIError/unacceptableStatus(_:)``. `200..<300` unless overridden.
    var acceptableStatusCodes: Range<Int> { get }
    /// How the task uses the engine's ``APIResponseCache``. `.networkOnly` unless overridden.
    var cacheOption: APICacheOption { get }
    /// Whether a successful response is stored in the engine's cache. `true` unless overridden.
    var shouldSaveInCache: Bool { get }
    /// Whose response this is: part of the cache key, so that one user's response is never served
    /// to another. `nil` (shared) unless overridden.
    var cachePartition: String? { get }
    /// Whether a response to a request that carries credentials (`Authorization`,
    /// `Proxy-Authorization` or `Cookie`) may be stored. `false` unless overridden.
    var cachesAuthenticatedResponses: Bool { get }
}

extension APIRequest {
    public var path: String { "" }
    public var method: HTTPMethod { .get }
    public var headers: [String: String] { [:] }
    public var body: APIRequestBody? { nil }
    public var timeout: TimeInterval { 60 }
    public var concurrencyPolicy: APIConcurrencyPolicy { .default }
    public var concurrencyScope: String? { nil }
    public var retryPolicy: APIRetryPolicy? { nil }
    public var deadline: TimeInterval? { nil }
    public var acceptableStatusCodes: Range<Int> { 200..<300 }
    public var cacheOption: APICacheOption { .networkOnly }
    public var shouldSaveInCache: Bool { true }
    public var cachePartition: String? { nil }
    public var cachesAuthenticatedResponses: Bool { false }

    /// ``url`` with ``path`` appended, one slash between them.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when the result is not a valid URL.
    public func resolvedURL() throws(APIError) -> URL {
        guard !path.isEmpty else { return url }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            throw .invalidRequest(reason: "base URL \(url.absoluteString) cannot be parsed")
        }
        let base = components.percentEncodedPath
        let suffix = path.hasPrefix("/") ? String(path.dropFirst()) : path
        let encodedSuffix = suffix.addingPercentEncoding(withAllowedCharacters: .apiPathAllowed) ?? suffix
        components.percentEncodedPath = (base.hasSuffix("/") ? base : base + "/") + encodedSuffix
        guard let joined = components.url else {
            throw .invalidRequest(reason: "path \"\(path)\" does not form a valid URL with \(url.absoluteString)")
        }
        return joined
    }

    /// The `URLRequest` the default ``APIManager/urlRequest(for:)`` sends: resolved URL, method,
    /// headers, timeout and body (whose content type is set unless a header already names one).
    public func makeURLRequest() throws(APIError) -> URLRequest {
        var request = URLRequest(url: try resolvedURL(), timeoutInterval: timeout)
        request.httpMethod = method.rawValue
        for (name, value) in headers {
            request.setValue(value, forHTTPHeaderField: name)
        }
        if let body {
            request.httpBody = body.data
            if let contentType = body.contentType, request.value(forHTTPHeaderField: "Content-Type") == nil {
                request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            }
        }
        return request
    }
}

/// A request body: bytes and the media type that describes them.
public struct APIRequestBody: Sendable, Hashable {
    public var data: Data
    /// Sent as `Content-Type` unless the request's headers already name one.
    public var contentType: String?

    public init(data: Data, contentType: String? = nil) {
        self.data = data
        self.contentType = contentType
    }

    /// A body encoded as JSON with the given encoder, `Content-Type: application/json`.
    public static func json<Value: Encodable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) throws(APIError)
        -> APIRequestBody
    {
        do {
            return APIRequestBody(data: try encoder.encode(value), contentType: "application/json")
        } catch {
            throw .invalidRequest(reason: "the body could not be encoded as JSON", underlying: error)
        }
    }
}

extension CharacterSet {
    /// Characters left as they are in a path: RFC 3986 `pchar` plus `/`.
    static let apiPathAllowed: CharacterSet = {
        var set = CharacterSet.urlPathAllowed
        set.remove(charactersIn: "?#")
        return set
    }()
}
