import Foundation

/// A type an ``APIMap`` (or ``Lenient``) converts loosely typed JSON into. Provided for `Bool`,
/// `Int`, `Double`, `String`, `URL`, `Date`, arrays and optionals of them, enums whose raw value
/// is one (declare the conformance: `enum Role: String, APILenientValue`), and ``APIMappable``
/// types.
public protocol APILenientValue {
    /// The value converted from `value` (never `null`), or an error naming `context.keyPath`.
    static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Self
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
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Bool {
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
    /// A whole number, or a string holding one; a number with a zero fraction (`4.0`, `"4e2"`) up to
    /// 2^53 in size, where a `Double` still holds every whole number exactly. A number that does
    /// not fit (`-9223372036854775809`, `1e-400`) is an error, never a different value.
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Int {
        switch value {
        case .int(let int): return int
        case .double(let double):
            if let int = exactInt(double) { return int }
        case .string(let text):
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if let int = Int(trimmed) { return int }
            if let double = LenientNumber.double(trimmed), let int = exactInt(double) { return int }
        default: break
        }
        throw context.mismatch(lenientDescription, value)
    }

    private static func exactInt(_ double: Double) -> Int? {
        guard double.isFinite, abs(double) <= 9_007_199_254_740_992, double.rounded() == double else { return nil }
        return Int(exactly: double)
    }

    public static var lenientDescription: String { "Int" }
}

extension Double: APILenientValue {
    /// A number, or a string holding one, within `Double`'s range: a number too large (`1e400`) or
    /// too small (`1e-400`, which would round to zero) is an error.
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Double
    {
        switch value {
        case .int(let int): return Double(int)
        case .double(let double) where double.isFinite: return double
        case .string(let text):
            if let double = LenientNumber.double(text.trimmingCharacters(in: .whitespaces)) { return double }
        default: break
        }
        throw context.mismatch(lenientDescription, value)
    }

    public static var lenientDescription: String { "Double" }
}

extension String: APILenientValue {
    /// A string, or a number or boolean written as text.
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> String
    {
        switch value {
        case .string(let text): return text
        case .int(let int): return String(int)
        case .double(let double) where double.isFinite:
            return double.rounded() == double && abs(double) < 1e15 ? String(Int(double)) : "\(double)"
        case .bool(let bool): return bool ? "true" : "false"
        case .double, .array, .object, .null, .file: throw context.mismatch(lenientDescription, value)
        }
    }

    public static var lenientDescription: String { "String" }
}

extension URL: APILenientValue {
    /// A string that is an absolute URL (with a scheme).
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> URL {
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
    /// In the context's ``APIMap/DateFormat``.
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Date {
        if case .pattern(let pattern) = context.dateFormat, let fault = DatePattern.fault(in: pattern) {
            throw APIMappingError(
                keyPath: context.keyPath,
                expected: "a date, but the pattern \(pattern.prefix(40).debugDescription) reads none: \(fault)",
                found: APIMappingError.describe(value))
        }
        if let date = context.dateFormat.date(from: value) { return date }
        throw context.mismatch(context.dateFormat.description, value)
    }

    public static var lenientDescription: String { APIMap.DateFormat.automatic.description }
}

extension Optional: APILenientValue where Wrapped: APILenientValue {
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError)
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
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError)
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
    public static func lenientValue(from value: APIValue, at context: APIMap.Context) throws(APIMappingError) -> Self {
        let raw = try RawValue.lenientValue(from: value, at: context)
        guard let converted = Self(rawValue: raw) else { throw context.mismatch(lenientDescription, value) }
        return converted
    }

    public static var lenientDescription: String { "a raw value of \(Self.self)" }
}

/// Numbers written as text.
enum LenientNumber {
    /// The finite `Double` a string holds; `nil` when it holds none, or one out of range: too large
    /// (infinite) or too small (a number with a non-zero digit that rounds to zero).
    static func double(_ text: String) -> Double? {
        guard let double = Double(text), double.isFinite else { return nil }
        if double == 0 {
            let mantissa = text.prefix { $0 != "e" && $0 != "E" }
            guard mantissa.allSatisfy({ !("1"..."9").contains($0) }) else { return nil }
        }
        return double
    }
}
