import Foundation

/// A request's parameters: where each goes (path template, query, body) and how it is encoded.
///
/// A dictionary literal is placed by method: in the query for GET, HEAD and DELETE,
/// in the body (encoded with ``APIRequest/bodyEncoding``) otherwise. Either way a value whose key
/// names a `{key}` in ``APIRequest/path`` fills it instead.
///
/// ```swift
/// var parameters: APIParameters { ["q": .string(query), "page": 2] }
/// ```
///
/// Parts compose; a later part wins a key given twice:
///
/// ```swift
/// var parameters: APIParameters {
///     [.path(["id": .int(itemID)]), .query(["notify": true]), .json(["quantity": 3])]
/// }
/// ```
public struct APIParameters: Sendable, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral {
    enum Placement: Sendable {
        case byMethod, path, query
        case body(APIParameters.BodyEncoding?)
    }

    enum Source: Sendable {
        case value(APIValue)
        case lazy(@Sendable () throws(APIError) -> APIValue)
        /// Body bytes made directly (raw, or an `Encodable` written by its encoder).
        case data(@Sendable () throws(APIError) -> APIRequestBody)
    }

    struct Part: Sendable {
        var placement: Placement
        var source: Source
    }

    var parts: [Part]

    init(parts: [Part]) { self.parts = parts }

    /// No parameters.
    public static let none = APIParameters(parts: [])

    /// Parameters placed by method.
    public init(_ values: [String: APIValue]) {
        self.parts = values.isEmpty ? [] : [Part(placement: .byMethod, source: .value(.object(values)))]
    }

    public init(dictionaryLiteral elements: (String, APIValue)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    /// The parts, in order.
    public init(arrayLiteral elements: APIParameters...) {
        self.parts = elements.flatMap(\.parts)
    }

    /// `lhs`'s parts, then `rhs`'s.
    public static func + (lhs: APIParameters, rhs: APIParameters) -> APIParameters {
        APIParameters(parts: lhs.parts + rhs.parts)
    }

    /// An `Encodable` value's properties, placed by method. Nested values follow the
    /// query rules (`a[b]`) or stay nested in a JSON body.
    public static func encoding<Value: Encodable & Sendable>(
        _ value: Value, encoder: JSONEncoder = JSONEncoder()
    ) -> APIParameters {
        encoded(value, encoder: encoder, placement: .byMethod)
    }

    /// One part whose value is `value` run through `encoder` when the request is built.
    private static func encoded<Value: Encodable & Sendable>(
        _ value: Value, encoder: JSONEncoder, placement: Placement
    ) -> APIParameters {
        APIParameters(parts: [
            Part(
                placement: placement,
                source: .lazy { () throws(APIError) in try APIValue(encoding: value, encoder: encoder) })
        ])
    }

    /// Values for the `{name}` templates of ``APIRequest/path``.
    public static func path(_ values: [String: APIValue]) -> APIParameters {
        APIParameters(parts: [Part(placement: .path, source: .value(.object(values)))])
    }

    /// Query parameters, whatever the method.
    public static func query(_ values: [String: APIValue]) -> APIParameters {
        APIParameters(parts: [Part(placement: .query, source: .value(.object(values)))])
    }

    /// An `Encodable` value's properties as query parameters, whatever the method.
    public static func query<Value: Encodable & Sendable>(
        encoding value: Value, encoder: JSONEncoder = JSONEncoder()
    ) -> APIParameters {
        encoded(value, encoder: encoder, placement: .query)
    }

    /// A JSON body, whatever the method: an object (merged with other JSON parts) or any other value.
    public static func json(_ value: APIValue) -> APIParameters {
        APIParameters(parts: [Part(placement: .body(.json), source: .value(value))])
    }

    /// An `Encodable` value written as the JSON body by `encoder`, as it is (not merged with other
    /// body parts).
    public static func json<Value: Encodable & Sendable>(
        encoding value: Value, encoder: JSONEncoder = JSONEncoder()
    ) -> APIParameters {
        APIParameters(parts: [
            Part(
                placement: .body(.json),
                source: .data { () throws(APIError) in
                    do {
                        return APIRequestBody(data: try encoder.encode(value), contentType: "application/json")
                    } catch {
                        throw .invalidRequest(
                            reason: "\(Value.self) could not be encoded as a JSON body", underlying: error)
                    }
                })
        ])
    }

    /// A form body (`application/x-www-form-urlencoded`), whatever the method.
    public static func form(_ values: [String: APIValue], encoding: APIParameters.QueryEncoding = .default)
        -> APIParameters
    {
        APIParameters(parts: [Part(placement: .body(.form(encoding)), source: .value(.object(values)))])
    }

    /// A body of raw bytes with its content type.
    public static func raw(_ data: Data, contentType: String) -> APIParameters {
        let body = APIRequestBody(data: data, contentType: contentType)
        return APIParameters(parts: [Part(placement: .body(nil), source: .data { () throws(APIError) in body })])
    }

    /// Whether there are no parts.
    public var isEmpty: Bool { parts.isEmpty }
}

/// Parameters sorted by destination, every lazy part evaluated.
struct ResolvedParameters {
    var byMethod: [String: APIValue] = [:]
    var path: [String: APIValue] = [:]
    var query: [String: APIValue] = [:]
    var body: Body?

    enum Body {
        case value(APIValue, APIParameters.BodyEncoding?)
        case data(APIRequestBody)
    }

    init(_ parameters: APIParameters) throws(APIError) {
        for part in parameters.parts {
            switch part.source {
            case .data(let make):
                guard body == nil else { throw Self.twoBodies }
                body = .data(try make())
            case .value(let value):
                try add(value, at: part.placement)
            case .lazy(let make):
                try add(try make(), at: part.placement)
            }
        }
    }

    private static let twoBodies = APIError.invalidRequest(
        reason: "the parameters give two bodies that cannot be merged (a raw or Encodable body, or different formats)")

    private mutating func add(_ value: APIValue, at placement: Placement) throws(APIError) {
        switch placement {
        case .byMethod: byMethod.merge(try Self.members(of: value, for: "parameters"), uniquingKeysWith: { $1 })
        case .path: path.merge(try Self.members(of: value, for: "path parameters"), uniquingKeysWith: { $1 })
        case .query: query.merge(try Self.members(of: value, for: "query parameters"), uniquingKeysWith: { $1 })
        case .body(let encoding): try addBody(value, encoding: encoding)
        }
    }

    typealias Placement = APIParameters.Placement

    /// Merges `value` into the body: two objects of the same format merge, anything else conflicts.
    mutating func addBody(_ value: APIValue, encoding: APIParameters.BodyEncoding?) throws(APIError) {
        switch body {
        case nil:
            body = .value(value, encoding)
        case .value(.object(let existing), let existingEncoding):
            guard case .object(let members) = value,
                encoding == nil || existingEncoding == nil || encoding?.contentType == existingEncoding?.contentType
            else { throw Self.twoBodies }
            body = .value(.object(existing.merging(members, uniquingKeysWith: { $1 })), existingEncoding ?? encoding)
        case .value, .data:
            throw Self.twoBodies
        }
    }

    private static func members(of value: APIValue, for what: String) throws(APIError) -> [String: APIValue] {
        guard case .object(let members) = value else {
            throw .invalidRequest(reason: "\(what) must be an object of named values, not \(value)")
        }
        return members
    }
}
