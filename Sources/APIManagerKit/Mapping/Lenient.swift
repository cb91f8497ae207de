/// A `Decodable` property read leniently, as an ``APIMap`` reads it: opt in per property.
///
/// ```swift
/// struct Product: APIResponse, Decodable {
///     let name: String
///     @Lenient var price: Double        // 9.5 or "9.5"
///     @Lenient var inStock: Bool        // true, "true", "1" or 1
///     @Lenient var rating: Int?         // missing, null, 4 or "4"
/// }
/// ```
///
/// A value that does not convert throws an ``APIMappingError`` naming its full coding path
/// (`items.0.price`). Dates are read as ``APIMap/DateFormat/automatic``.
@propertyWrapper
public struct Lenient<Value: APILenientValue>: Decodable {
    /// The converted value.
    public var wrappedValue: Value

    /// A property holding `wrappedValue`.
    public init(wrappedValue: Value) {
        self.wrappedValue = wrappedValue
    }

    public init(from decoder: any Decoder) throws {
        let context = APIMap.Context(keyPath: Self.keyPath(decoder.codingPath))
        let value = try APIValue(from: decoder)
        if value == .null, let missing = Value.whenMissing {
            wrappedValue = missing
            return
        }
        wrappedValue = try Value.lenientValue(from: value, at: context)
    }

    static func keyPath(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }
}

extension Lenient: Sendable where Value: Sendable {}
extension Lenient: Equatable where Value: Equatable {}
extension Lenient: Hashable where Value: Hashable {}

extension KeyedDecodingContainer {
    /// A missing key of a lenient optional property is `nil`, as for a plain optional.
    public func decode<Value: APILenientValue & ExpressibleByNilLiteral>(
        _ type: Lenient<Value>.Type, forKey key: Key
    ) throws -> Lenient<Value> {
        try decodeIfPresent(type, forKey: key) ?? Lenient(wrappedValue: nil)
    }
}
