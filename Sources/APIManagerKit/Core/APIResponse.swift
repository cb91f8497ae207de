import Foundation

/// The typed result of an endpoint, built and validated from what the transport received.
///
/// Three ways to conform:
/// - implement ``init(from:)`` yourself;
/// - be `Decodable`: the body is decoded as JSON with a default `JSONDecoder`;
/// - adopt ``APIEnvelopeResponse`` and implement `init(code:message:result:)`.
///
/// The initializer may throw to reject a response: a `DecodingError` becomes
/// ``APIError/decoding(underlying:response:)`` (never retried), an ``APIError`` stays as it is, and
/// anything else becomes ``APIError/rejected(underlying:response:)``.
public protocol APIResponse: Sendable {
    /// Builds the response from a raw response whose status the request accepts.
    init(from raw: APIRawResponse) throws

    /// Sent as `Accept` unless the request's headers name one. `nil` (no header) unless overridden;
    /// `"application/json"` for `Decodable` and envelope responses.
    static var acceptedContentType: String? { get }
    /// The decoder the `Decodable` default uses. A new `JSONDecoder()` unless overridden.
    static var decoder: JSONDecoder { get }
    /// Where the `Decodable` default finds the value in the JSON body: dot-separated keys, with
    /// numbers indexing arrays (`"data.items"`, `"items.0.name"`). `nil` (the whole body) unless
    /// overridden.
    static var keyPath: String? { get }
}

extension APIResponse {
    public static var acceptedContentType: String? { nil }
    public static var decoder: JSONDecoder { JSONDecoder() }
    public static var keyPath: String? { nil }
}

extension APIResponse where Self: Decodable {
    public static var acceptedContentType: String? { "application/json" }

    /// Decodes the JSON body with ``decoder``, at ``keyPath`` if set. An empty body decodes as `{}`
    /// so that a type whose properties are all optional accepts a `204 No Content`. A failure throws
    /// the decoder's `DecodingError`, whose coding path starts at the body's root.
    public init(from raw: APIRawResponse) throws {
        let body = raw.body.isEmpty ? Data("{}".utf8) : raw.body
        if let keyPath = Self.keyPath, !keyPath.isEmpty {
            self = try Self.decoder.decode(KeyPathDecoded<Self>.self, from: body).value
        } else {
            self = try Self.decoder.decode(Self.self, from: body)
        }
    }
}

/// A response that carries nothing: accepts any acceptable status and any body.
public struct APIEmptyResponse: APIResponse, Hashable {
    /// The empty response.
    public init() {}
    public init(from raw: APIRawResponse) throws {}
}

/// The raw response itself, for endpoints that want the status, headers and bytes.
extension APIRawResponse: APIResponse {
    /// No `Accept` header: the raw response takes whatever comes.
    public static var acceptedContentType: String? { nil }
    public init(from raw: APIRawResponse) throws { self = raw }
}

/// An envelope: a JSON object with a code, a message and a result, checked by
/// `init(code:message:result:)`, which throws to reject the response.
///
/// ```swift
/// struct WeatherResponse: APIEnvelopeResponse {
///     struct Refused: Error { let message: String }
///     let temperature: Double
///     init(code: Int, message: String, result: Any?) throws {
///         guard code == 0 else { throw Refused(message: message) }  // the task fails: `rejected`
///         guard let fields = result as? [String: Any], let temperature = fields["temperature"] as? Double else {
///             throw Refused(message: "no temperature")
///         }
///         self.temperature = temperature
///     }
/// }
/// ```
public protocol APIEnvelopeResponse: APIResponse {
    /// Validates the envelope and builds the response from its `result`, a value from
    /// `JSONSerialization` (dictionary, array, string, number, `NSNull`) or `nil` when absent.
    init(code: Int, message: String, result: Any?) throws
    /// The key of the code. `"code"` unless overridden.
    static var codeKey: String { get }
    /// The key of the message. `"message"` unless overridden; a missing message reads as `""`.
    static var messageKey: String { get }
    /// The key of the result. `"result"` unless overridden.
    static var resultKey: String { get }
}

/// Why an envelope could not be read.
public struct APIEnvelopeError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

extension APIEnvelopeResponse {
    public static var acceptedContentType: String? { "application/json" }
    public static var codeKey: String { "code" }
    public static var messageKey: String { "message" }
    public static var resultKey: String { "result" }

    /// Parses the body as a JSON object and calls `init(code:message:result:)`. A body that is not a
    /// JSON object, or has no integer code, throws a `DecodingError` (so the task fails with
    /// ``APIError/decoding(underlying:response:)``).
    public init(from raw: APIRawResponse) throws {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: raw.body, options: [.fragmentsAllowed])
        } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "The body is not JSON.", underlyingError: error))
        }
        guard let dictionary = object as? [String: Any] else {
            throw DecodingError.typeMismatch(
                [String: Any].self, .init(codingPath: [], debugDescription: "The envelope is not a JSON object."))
        }
        let code: Int
        switch dictionary[Self.codeKey] {
        case let int as Int:
            code = int
        case let number as NSNumber:
            code = number.intValue
        case let string as String where Int(string) != nil:
            code = Int(string) ?? 0
        default:
            throw DecodingError.keyNotFound(
                AnyKey(stringValue: Self.codeKey),
                .init(codingPath: [], debugDescription: "The envelope has no integer \"\(Self.codeKey)\"."))
        }
        let message = dictionary[Self.messageKey] as? String ?? ""
        let result = dictionary[Self.resultKey].flatMap { $0 is NSNull ? nil : $0 }
        try self.init(code: code, message: message, result: result)
    }
}
