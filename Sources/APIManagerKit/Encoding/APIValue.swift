import Foundation

/// A parameter value: what query strings, form bodies, JSON bodies and path templates are built from.
///
/// Write values as literals: `["q": "swift", "page": 2, "tags": ["a", "b"], "filter": ["min": 1]]`.
/// An `Encodable` value converts with ``init(encoding:encoder:)``.
public enum APIValue: Sendable, Hashable {
    /// A string.
    case string(String)
    /// A whole number.
    case int(Int)
    /// A number with a fraction, or a whole number too large for an `Int`. A JSON number beyond
    /// every Swift number's range (`1e400`, `1e-400`) decodes as `.double(.nan)`, which lenient
    /// mapping refuses for every type.
    case double(Double)
    /// `true` or `false`.
    case bool(Bool)
    /// An array of values.
    case array([APIValue])
    /// An object: values by key.
    case object([String: APIValue])
    /// An explicit null: `null` in JSON; in a query or form, what ``APIParameters/QueryEncoding/NullEncoding`` says
    /// (dropped unless set otherwise).
    case null
    /// A file to upload: a request whose body parameters hold one is sent as `multipart/form-data`
    /// (RFC 7578) whatever its ``APIRequest/bodyEncoding``. It has no JSON or query form: encoding
    /// one as JSON throws, and one in the query fails the request.
    case file(APIFile)

    /// Converts an `Encodable` value through `encoder` (its key and date strategies apply).
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when the value does not encode.
    public init<Value: Encodable>(encoding value: Value, encoder: JSONEncoder = JSONEncoder()) throws(APIError) {
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw .invalidRequest(reason: "\(Value.self) could not be encoded as parameters", underlying: error)
        }
        do {
            self = try JSONDecoder().decode(APIValue.self, from: data)
        } catch {
            throw .invalidRequest(reason: "\(Value.self) did not encode to a JSON value", underlying: error)
        }
    }

    /// The value as a query or path component: scalars only.
    var scalarText: String? {
        switch self {
        case .string(let string): return string
        case .int(let int): return String(int)
        case .double(let double): return double.isFinite ? "\(double)" : nil
        case .bool(let bool): return bool ? "true" : "false"
        case .array, .object, .null, .file: return nil
        }
    }

    /// Whether a file is in it, at any depth.
    var containsFile: Bool {
        switch self {
        case .file: return true
        case .array(let elements): return elements.contains { $0.containsFile }
        case .object(let members): return members.values.contains { $0.containsFile }
        case .string, .int, .double, .bool, .null: return false
        }
    }

    /// The object's members, when the value is an object.
    var objectValue: [String: APIValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}

extension APIValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let int = try? container.decode(Int.self) {
            // JSONDecoder reads a number too small for a Double (`1e-400`) as the Int 0; a real
            // integer also reads as a Double.
            self = (try? container.decode(Double.self)) == nil ? .double(.nan) : .int(int)
        } else if let double = try? container.decode(Double.self) {
            self = .double(double)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([APIValue].self) {
            self = .array(array)
        } else if let object = try? container.decode([String: APIValue].self) {
            self = .object(object)
        } else {
            // Every JSON value but a number out of every Swift number's range (`1e400`) reads as
            // one of the above.
            self = .double(.nan)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let string): try container.encode(string)
        case .int(let int): try container.encode(int)
        case .double(let double): try container.encode(double)
        case .bool(let bool): try container.encode(bool)
        case .array(let array): try container.encode(array)
        case .object(let object): try container.encode(object)
        case .null: try container.encodeNil()
        case .file(let file):
            throw EncodingError.invalidValue(
                file,
                EncodingError.Context(
                    codingPath: encoder.codingPath,
                    debugDescription: "a file has no JSON form: it is sent in a multipart/form-data body"))
        }
    }
}

extension APIValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: APIValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    /// A later duplicate key replaces an earlier one.
    public init(dictionaryLiteral elements: (String, APIValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
