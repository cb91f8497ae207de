/// The reason phrase of a status code, in lower case, the same on every platform (Foundation's
/// `HTTPURLResponse.localizedString(forStatusCode:)` reads "not found" on Apple platforms and
/// "Not Found" on Linux).
enum HTTPStatusText {
    static func phrase(for statusCode: Int) -> String {
        if let phrase = phrases[statusCode] { return phrase }
        switch statusCode {
        case 100..<200: return "informational"
        case 200..<300: return "success"
        case 300..<400: return "redirection"
        case 400..<500: return "client error"
        case 500..<600: return "server error"
        default: return "unknown status"
        }
    }

    /// RFC 9110 §15 (with 429 from RFC 6585 and 103 from RFC 8297).
    private static let phrases: [Int: String] = [
        100: "continue", 101: "switching protocols", 103: "early hints",
        200: "ok", 201: "created", 202: "accepted", 203: "non-authoritative information", 204: "no content",
        205: "reset content", 206: "partial content",
        300: "multiple choices", 301: "moved permanently", 302: "found", 303: "see other", 304: "not modified",
        305: "use proxy", 307: "temporary redirect", 308: "permanent redirect",
        400: "bad request", 401: "unauthorized", 402: "payment required", 403: "forbidden", 404: "not found",
        405: "method not allowed", 406: "not acceptable", 407: "proxy authentication required",
        408: "request timeout", 409: "conflict", 410: "gone", 411: "length required", 412: "precondition failed",
        413: "content too large", 414: "uri too long", 415: "unsupported media type", 416: "range not satisfiable",
        417: "expectation failed", 421: "misdirected request", 422: "unprocessable entity", 426: "upgrade required",
        428: "precondition required", 429: "too many requests", 431: "request header fields too large",
        451: "unavailable for legal reasons",
        500: "internal server error", 501: "not implemented", 502: "bad gateway", 503: "service unavailable",
        504: "gateway timeout", 505: "http version not supported",
    ]
}
