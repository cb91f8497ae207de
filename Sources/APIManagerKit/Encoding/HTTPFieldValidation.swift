import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Checks header names and values before they reach a transport: a name must be an RFC 9110 token,
/// and a value must not contain CR, LF or NUL. Anything else could inject header lines (a name with
/// CR LF reaches the wire as written on Linux) or be dropped silently (a value with CR LF).
enum HTTPFieldValidation {
    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isTokenCharacter)
    }

    static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` naming the first bad header.
    static func validate(name: String, value: String) throws(APIError) {
        guard isValidName(name) else {
            throw .invalidRequest(
                reason: "the header name \(name.debugDescription) is not a valid HTTP field name (RFC 9110 token)")
        }
        guard isValidValue(value) else {
            throw .invalidRequest(
                reason:
                    "the value of the header \"\(name)\" contains CR, LF or NUL, which would split or end the header")
        }
    }

    /// Checks every header of a finished `URLRequest` (whatever set it: the request, `configure(_:)`,
    /// a manager's `urlRequest(for:)` or persisted headers), in name order.
    static func validate(_ request: URLRequest) throws(APIError) {
        guard let fields = request.allHTTPHeaderFields, !fields.isEmpty else { return }
        guard fields.contains(where: { !isValidName($0.key) || !isValidValue($0.value) }) else { return }
        // Sorted only to name the same header every time.
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            try validate(name: name, value: value)
        }
    }
}
