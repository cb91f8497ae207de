import Foundation

/// A type an ``APIMap`` (or ``Lenient``) converts loosely typed JSON into. Provided for `Bool`,
/// `Int`, `Double`, `String`, `URL`, `Date`, arrays and optionals of them, enums whose raw value
/// is one (declare the conformance: `enum Role: String, APILenientValue`), and ``APIMappable``
/// types.
public protocol APILenientValue {
    /// The value converted from `value` (never `null`), or an error naming `context.keyPath`.
    static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Self
    /// What the type expects, for errors (`Int`, `Bool`).
    static var lenientDescription: String { get }
    /// The value when the key is missing or `null`: `nil` for optionals; an error otherwise.
    static var whenMissing: Self? { get }
}

extension APILenientValue {
    public static var whenMissing: Self? { nil }
}

extension Bool: APILenientValue {
    /// `true`/`false`, the strings `"true"`/`"false"`/`"1"`/`"0"` (any case, trimmed), the numbers 1/0.
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Bool {
        switch value {
        case .bool(let bool): return bool
        case .int(1): return true
        case .int(0): return false
        case .double(1): return true
        case .double(0): return false
        case .string(let text):
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default: break
            }
        default: break
        }
        throw context.mismatch(lenientDescription, value)
    }

    public static var lenientDescription: String { "Bool" }
}

extension Int: APILenientValue {
    /// A whole number, or a string holding one; a double with no fraction within range.
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Int {
        switch value {
        case .int(let int): return int
        case .double(let double):
            if double.rounded() == double, let int = Int(exactly: double) { return int }
        case .string(let text):
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if let int = Int(trimmed) { return int }
            if let double = Double(trimmed), double.rounded() == double, let int = Int(exactly: double) { return int }
        default: break
        }
        throw context.mismatch(lenientDescription, value)
    }

    public static var lenientDescription: String { "Int" }
}

extension Double: APILenientValue {
    /// A number, or a string holding a finite one.
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Double {
        switch value {
        case .int(let int): return Double(int)
        case .double(let double): return double
        case .string(let text):
            if let double = Double(text.trimmingCharacters(in: .whitespaces)), double.isFinite { return double }
        default: break
        }
        throw context.mismatch(lenientDescription, value)
    }

    public static var lenientDescription: String { "Double" }
}

extension String: APILenientValue {
    /// A string, or a number or boolean written as text.
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> String {
        switch value {
        case .string(let text): return text
        case .int(let int): return String(int)
        case .double(let double):
            return double.rounded() == double && abs(double) < 1e15 ? String(Int(double)) : "\(double)"
        case .bool(let bool): return bool ? "true" : "false"
        default: throw context.mismatch(lenientDescription, value)
        }
    }

    public static var lenientDescription: String { "String" }
}

extension URL: APILenientValue {
    /// A string that is an absolute URL (with a scheme).
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> URL {
        if case .string(let text) = value, let url = URL(string: text.trimmingCharacters(in: .whitespaces)),
            url.scheme != nil
        {
            return url
        }
        throw context.mismatch(lenientDescription, value)
    }

    public static var lenientDescription: String { "a URL" }
}

extension Date: APILenientValue {
    /// In the context's ``APIDateFormat``.
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Date {
        if let date = context.dateFormat.date(from: value) { return date }
        throw context.mismatch(context.dateFormat.description, value)
    }

    public static var lenientDescription: String { APIDateFormat.automatic.description }
}

extension Optional: APILenientValue where Wrapped: APILenientValue {
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError)
        -> Wrapped?
    {
        if value == .null { return nil }
        return try Wrapped.lenientValue(from: value, at: context)
    }

    public static var lenientDescription: String { Wrapped.lenientDescription + " or nothing" }
    public static var whenMissing: Wrapped?? { .some(nil) }
}

extension Array: APILenientValue where Element: APILenientValue {
    /// An array whose every element converts (a `null` element only for optional elements).
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError)
        -> [Element]
    {
        guard case .array(let elements) = value else { throw context.mismatch(lenientDescription, value) }
        var converted: [Element] = []
        converted.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            let elementContext = context.appending(String(index))
            if element == .null {
                guard let missing = Element.whenMissing else {
                    throw elementContext.mismatch(Element.lenientDescription, element)
                }
                converted.append(missing)
            } else {
                converted.append(try Element.lenientValue(from: element, at: elementContext))
            }
        }
        return converted
    }

    public static var lenientDescription: String { "an array of \(Element.lenientDescription)" }
}

extension APILenientValue where Self: RawRepresentable, RawValue: APILenientValue {
    /// The case whose raw value the JSON holds (converted leniently first: `"2"` for an `Int` raw value).
    public static func lenientValue(from value: APIValue, at context: APIMapContext) throws(APIMappingError) -> Self {
        let raw = try RawValue.lenientValue(from: value, at: context)
        guard let converted = Self(rawValue: raw) else { throw context.mismatch(lenientDescription, value) }
        return converted
    }

    public static var lenientDescription: String { "a raw value of \(Self.self)" }
}
