import Foundation

/// Loosely typed JSON, read by key path with lenient conversions: the mapping API.
///
/// ```swift
/// struct Profile: APIResponse, APIMappable {
///     let name: String
///     let age: Int?
///     let isAdmin: Bool
///     let joined: Date
///     init(map: APIMap) throws(APIMappingError) {
///         name = try map.value("data.user.0.name")
///         age = try map.value("data.user.0.age")            // nil when missing or null
///         isAdmin = try map.value("data.user.0.admin")      // true, "true", "1" or 1
///         joined = try map.value("data.user.0.joined")      // ISO 8601, or seconds or milliseconds since 1970
///     }
/// }
/// ```
///
/// A key path is keys separated by dots; a key that is a number indexes an array. Every failure is
/// an ``APIMappingError`` naming the full key path and what was found; through a manager it becomes
/// ``APIError/decoding(underlying:response:)``. No input makes it crash.
public struct APIMap: Sendable {
    /// The JSON value this map reads.
    public let root: APIValue
    /// How dates are read unless a call says otherwise. `.automatic` unless given.
    public var dateFormat: APIMap.DateFormat
    /// The key path of ``root`` in the document it came from (for nested maps); empty at the top.
    public let keyPath: String

    /// A map of `root`; `keyPath` is where `root` sits in its document, for errors.
    public init(_ root: APIValue, dateFormat: APIMap.DateFormat = .automatic, keyPath: String = "") {
        self.root = root
        self.dateFormat = dateFormat
        self.keyPath = keyPath
    }

    /// Parses a JSON document; a body that is not JSON fails with an ``APIMappingError`` at the top
    /// level.
    public init(json: Data, dateFormat: APIMap.DateFormat = .automatic) throws(APIMappingError) {
        do {
            self.init(try JSONDecoder().decode(APIValue.self, from: json), dateFormat: dateFormat)
        } catch {
            throw APIMappingError(
                keyPath: "", expected: "a JSON document", found: "\(json.count) bytes that are not JSON")
        }
    }

    /// The value at `keyPath`, converted; an optional type gives `nil` when it is missing or null.
    public func value<Value: APILenientValue>(_ keyPath: String, as type: Value.Type = Value.self)
        throws(APIMappingError) -> Value
    {
        try value(keyPath, as: type, dateFormat: dateFormat)
    }

    /// A date at `keyPath`, read in `format`.
    public func value<Value: APILenientValue>(
        _ keyPath: String, as type: Value.Type = Value.self, dateFormat: APIMap.DateFormat
    )
        throws(APIMappingError) -> Value
    {
        let path = joined(keyPath)
        let found = Self.lookUp(keyPath, in: root)
        guard let found, found != .null else {
            if let missing = Value.whenMissing { return missing }
            throw APIMappingError(
                keyPath: path, expected: Value.lenientDescription, found: APIMappingError.describe(found))
        }
        return try Value.lenientValue(from: found, at: APIMap.Context(keyPath: path, dateFormat: dateFormat))
    }

    /// Whether anything but `null` is at `keyPath`.
    public func contains(_ keyPath: String) -> Bool {
        guard let found = Self.lookUp(keyPath, in: root) else { return false }
        return found != .null
    }

    private func joined(_ keyPath: String) -> String {
        if self.keyPath.isEmpty { return keyPath }
        return keyPath.isEmpty ? self.keyPath : self.keyPath + "." + keyPath
    }

    /// Walks the key path; `nil` when a step is missing (an absent key, an index out of range, a
    /// step into a scalar).
    static func lookUp(_ keyPath: String, in root: APIValue) -> APIValue? {
        guard !keyPath.isEmpty else { return root }
        var current = root
        for component in keyPath.split(separator: ".", omittingEmptySubsequences: false) {
            switch current {
            case .object(let members):
                guard let next = members[String(component)] else { return nil }
                current = next
            case .array(let elements):
                guard let index = Int(component), elements.indices.contains(index) else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }
}

extension APIMap {
    /// Where a conversion happens: the full key path, for errors, and how dates are read.
    public struct Context: Sendable {
        /// The full key path of the value being converted.
        public let keyPath: String
        /// How dates are read.
        public let dateFormat: APIMap.DateFormat

        /// A context at `keyPath`.
        public init(keyPath: String, dateFormat: APIMap.DateFormat = .automatic) {
            self.keyPath = keyPath
            self.dateFormat = dateFormat
        }

        /// The context of an element or member below this one.
        func appending(_ component: String) -> APIMap.Context {
            APIMap.Context(keyPath: keyPath.isEmpty ? component : keyPath + "." + component, dateFormat: dateFormat)
        }

        /// The error for `value`, which is not what `expected` describes.
        func mismatch(_ expected: String, _ value: APIValue) -> APIMappingError {
            APIMappingError(keyPath: keyPath, expected: expected, found: APIMappingError.describe(value))
        }
    }
}

/// A type built from an ``APIMap`` (nested objects, or a whole response). A response type that is
/// `APIMappable` is built from its body's JSON.
public protocol APIMappable: APILenientValue {
    /// Reads the type's properties from `map`; throw the ``APIMappingError`` a read gives.
    init(map: APIMap) throws(APIMappingError)
}

extension APIMappable {
    /// Builds the type from an object, through ``init(map:)`` with a map rooted at the object.
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Self {
        guard case .object = value else { throw context.mismatch("an object (\(Self.self))", value) }
        return try Self(map: APIMap(value, dateFormat: context.dateFormat, keyPath: context.keyPath))
    }

    public static var lenientDescription: String { "an object (\(Self.self))" }
}

extension APIResponse where Self: APIMappable {
    /// Builds the response from its body's JSON through ``APIMappable/init(map:)``.
    public init(from raw: APIRawResponse) throws {
        try self.init(map: APIMap(json: raw.body))
    }
}
