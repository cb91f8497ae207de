import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Checks header names and values before they reach a transport: a name must be an RFC 9110 token,
/// and a value must not contain CR, LF or NUL. Anything else could inject header lines (a name with
/// CR LF reaches the wire as written on Linux) or be dropped silently (a value with CR LF).
enum HTTPFieldValidation {
    /// RFC 9110 §5.6.2 `tchar`: digits, letters and ``!#$%&'*+-.^_`|~``, as two bit masks over the
    /// bytes below 128 (bit `b` of the first for byte `b` < 64, bit `b - 64` of the second).
    private static let tokenBitsLow: UInt64 = 0x03ff_6cfa_0000_0000
    private static let tokenBitsHigh: UInt64 = 0x57ff_ffff_c7ff_fffe

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0..<64: return tokenBitsLow & (1 << UInt64(byte)) != 0
        case 64..<128: return tokenBitsHigh & (1 << UInt64(byte - 64)) != 0
        default: return false
        }
    }

    /// Whether `name` is an RFC 9110 token (every request's headers pass here: read as one run of bytes).
    static func isValidName(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in !bytes.isEmpty && bytes.allSatisfy(isTokenCharacter) }
    }

    /// Whether `value` has no CR, LF or NUL.
    static func isValidValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in !bytes.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } }
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
