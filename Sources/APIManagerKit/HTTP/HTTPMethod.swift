/// An HTTP request method. Any token is allowed; the common ones have static members.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String

    public init(rawValue: String) {
        // Methods arrive upper-cased nearly always (every request's `URLRequest.httpMethod`), and
        // `uppercased()` makes a new string: only a method that is not gets one.
        let isUpperCased = rawValue.utf8.allSatisfy { $0 < 0x80 && !(0x61...0x7A).contains($0) }
        self.rawValue = isUpperCased ? rawValue : rawValue.uppercased()
    }
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    /// `GET`: idempotent.
    public static let get: HTTPMethod = "GET"
    /// `HEAD`: idempotent.
    public static let head: HTTPMethod = "HEAD"
    /// `POST`: not idempotent.
    public static let post: HTTPMethod = "POST"
    /// `PUT`: idempotent.
    public static let put: HTTPMethod = "PUT"
    /// `PATCH`: not idempotent.
    public static let patch: HTTPMethod = "PATCH"
    /// `DELETE`: idempotent.
    public static let delete: HTTPMethod = "DELETE"
    /// `OPTIONS`: idempotent.
    public static let options: HTTPMethod = "OPTIONS"
    /// `TRACE`: idempotent.
    public static let trace: HTTPMethod = "TRACE"

    /// Whether sending the request twice has the same effect as sending it once (RFC 9110 §9.2.2):
    /// GET, HEAD, PUT, DELETE, OPTIONS and TRACE. Retry only repeats idempotent requests unless the
    /// request opts in.
    public var isIdempotent: Bool {
        switch self {
        case .get, .head, .put, .delete, .options, .trace: return true
        default: return false
        }
    }

    /// Whether ``APIRequest/parameters`` placed by method go in the query (GET, HEAD and DELETE,
    /// the usual rule) rather than the body (every other method).
    public var putsParametersInQuery: Bool {
        switch self {
        case .get, .head, .delete: return true
        default: return false
        }
    }

    public var description: String { rawValue }
}
