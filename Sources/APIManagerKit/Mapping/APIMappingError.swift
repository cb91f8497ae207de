/// A value of loosely typed JSON that could not become what a mapping asked for: where it is, what
/// was expected, and what was found.
public struct APIMappingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The full key path of the value (`data.user.0.age`); empty for the top level.
    public let keyPath: String
    /// What the mapping asked for (`Int`, `Bool`, `a date (ISO 8601 or a Unix timestamp)`).
    public let expected: String
    /// What the JSON held there (`the string "abc"`, `null`, `nothing`).
    public let found: String

    /// An error at `keyPath`.
    public init(keyPath: String, expected: String, found: String) {
        self.keyPath = keyPath
        self.expected = expected
        self.found = found
    }

    /// `at data.user.0.age: expected Int, found the string "abc"`.
    public var description: String {
        "at \(keyPath.isEmpty ? "the top level" : keyPath): expected \(expected), found \(found)"
    }

    /// How a found value reads in an error: its kind and, for a scalar, a short excerpt.
    static func describe(_ value: APIValue?) -> String {
        switch value {
        case nil: return "nothing"
        case .null?: return "null"
        case .bool(let bool)?: return "the boolean \(bool)"
        case .int(let int)?: return "the number \(int)"
        case .double(let double)?: return double.isFinite ? "the number \(double)" : "a number out of range"
        case .string(let string)?:
            let excerpt = string.count > 40 ? String(string.prefix(40)) + "…" : string
            return "the string \(excerpt.debugDescription)"
        case .array(let array)?: return "an array of \(array.count)"
        case .object(let object)?: return "an object of \(object.count) keys"
        case .file?: return "a file"
        }
    }
}
