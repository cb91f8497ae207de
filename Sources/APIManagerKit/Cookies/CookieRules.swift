import Foundation

/// RFC 6265 §5, by hand: parsing `Set-Cookie` (with its lenient cookie-date algorithm), and the
/// domain and path rules that decide where a cookie may be stored and sent. No input may crash it.
enum CookieRules {
    /// The largest `name=value` kept, in bytes (RFC 6265 §6.1's minimum); a larger cookie is ignored.
    static let largestCookie = 4096
    /// Suffixes under which anyone may register a name (a few of the Public Suffix List's
    /// multi-label entries): a `Domain` equal to one of them, or to a single label, is refused, so
    /// that `a.example.co.uk` cannot set a cookie for every `*.co.uk`.
    static let publicSuffixes: Set<String> = [
        "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "com.au", "net.au", "org.au", "co.jp", "ne.jp",
        "or.jp", "com.br", "com.cn", "com.mx", "co.nz", "co.in", "co.za", "com.tr", "com.tw", "com.hk",
        "github.io", "gitlab.io", "herokuapp.com", "appspot.com", "vercel.app", "netlify.app", "pages.dev",
        "workers.dev", "blogspot.com", "cloudfront.net", "azurewebsites.net", "web.app", "firebaseapp.com",
    ]

    /// A parsed `Set-Cookie` value, before the storage rules: `nil` attributes were absent.
    struct Parsed: Equatable {
        var name: String
        var value: String
        var expires: Date?
        /// Seconds from now; `Max-Age` wins over `Expires`.
        var maxAge: Int?
        var domain: String?
        var path: String?
        var isSecure = false
        var isHTTPOnly = false
        var sameSite: APICookieStore.Cookie.SameSite?
    }

    // MARK: Parsing (§5.2)

    /// One `Set-Cookie` value; `nil` when it sets no cookie (no `=`, an empty name, too large).
    static func parse(_ header: String) -> Parsed? {
        let pieces = header.split(separator: ";", omittingEmptySubsequences: false)
        guard let first = pieces.first, let equals = first.firstIndex(of: "=") else { return nil }
        let name = first[..<equals].trimmingCharacters(in: .whitespaces)
        let value = first[first.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= largestCookie,
            (name + value).unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
        else { return nil }
        var parsed = Parsed(name: name, value: value)
        for piece in pieces.dropFirst() {
            let attributeName: String
            let attributeValue: String
            if let equals = piece.firstIndex(of: "=") {
                attributeName = piece[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
                attributeValue = piece[piece.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            } else {
                attributeName = piece.trimmingCharacters(in: .whitespaces).lowercased()
                attributeValue = ""
            }
            switch attributeName {
            case "expires":
                if let date = cookieDate(attributeValue) { parsed.expires = date }
            case "max-age":
                if let seconds = maxAge(attributeValue) { parsed.maxAge = seconds }
            case "domain":
                guard !attributeValue.isEmpty else { continue }
                var domain = attributeValue.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                parsed.domain = domain
            case "path":
                parsed.path = attributeValue.hasPrefix("/") ? attributeValue : nil
            case "secure":
                parsed.isSecure = true
            case "httponly":
                parsed.isHTTPOnly = true
            case "samesite":
                parsed.sameSite = APICookieStore.Cookie.SameSite(rawValue: attributeValue.lowercased())
            default:
                continue
            }
        }
        return parsed
    }

    /// `Max-Age`: an optional `-` and digits; anything else is ignored. Out of `Int` range counts
    /// as the largest number of that sign.
    static func maxAge(_ text: String) -> Int? {
        var digits = Substring(text)
        let negative = digits.hasPrefix("-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        guard let magnitude = Int(digits) else { return negative ? Int.min : Int.max }
        return negative ? -magnitude : magnitude
    }

    /// The cookie-date algorithm of RFC 6265 §5.1.1: lenient about order and separators, strict
    /// about ranges; `nil` when it is no date.
    static func cookieDate(_ text: String) -> Date? {
        guard text.utf8.count <= 256 else { return nil }
        var time: (hour: Int, minute: Int, second: Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        for token in dateTokens(text) {
            if time == nil, let found = timeToken(token) {
                time = found
            } else if day == nil, let found = leadingNumber(token, digits: 1...2) {
                day = found
            } else if month == nil, let found = monthToken(token) {
                month = found
            } else if year == nil, let found = leadingNumber(token, digits: 2...4) {
                year = found
            }
        }
        guard let time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, time.hour <= 23, time.minute <= 59, time.second <= 59,
            day <= HTTPDate.daysIn(month: month, year: year)
        else { return nil }
        let days = HTTPDate.daysSinceEpoch(year: year, month: month, day: day)
        return Date(
            timeIntervalSince1970: TimeInterval(days * 86_400 + time.hour * 3_600 + time.minute * 60 + time.second))
    }

    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte) || (0x5B...0x60).contains(byte)
            || (0x7B...0x7E).contains(byte)
    }

    private static func dateTokens(_ text: String) -> [ArraySlice<UInt8>] {
        let bytes = Array(text.utf8)
        var tokens: [ArraySlice<UInt8>] = []
        var start: Int?
        for index in 0...bytes.count {
            if index == bytes.count || isDelimiter(bytes[index]) {
                if let begin = start { tokens.append(bytes[begin..<index]) }
                start = nil
            } else if start == nil {
                start = index
            }
        }
        return tokens
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// `1*2DIGIT ":" 1*2DIGIT ":" 1*2DIGIT`, then anything that does not start with a digit.
    private static func timeToken(_ token: ArraySlice<UInt8>) -> (hour: Int, minute: Int, second: Int)? {
        var fields: [Int] = []
        var index = token.startIndex
        for field in 0..<3 {
            var value = 0
            var length = 0
            while index < token.endIndex, isDigit(token[index]), length < 2 {
                value = value * 10 + Int(token[index] - 0x30)
                length += 1
                index += 1
            }
            guard length > 0 else { return nil }
            fields.append(value)
            if field < 2 {
                guard index < token.endIndex, token[index] == UInt8(ascii: ":") else { return nil }
                index += 1
            }
        }
        if index < token.endIndex, isDigit(token[index]) { return nil }
        return (fields[0], fields[1], fields[2])
    }

    /// A run of `digits` digits not followed by another digit.
    private static func leadingNumber(_ token: ArraySlice<UInt8>, digits: ClosedRange<Int>) -> Int? {
        var value = 0
        var length = 0
        var index = token.startIndex
        while index < token.endIndex, isDigit(token[index]) {
            guard length < digits.upperBound else { return nil }
            value = value * 10 + Int(token[index] - 0x30)
            length += 1
            index += 1
        }
        return digits.contains(length) ? value : nil
    }

    private static let months: [[UInt8]] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .map { Array($0.utf8) }

    private static func monthToken(_ token: ArraySlice<UInt8>) -> Int? {
        guard token.count >= 3 else { return nil }
        let prefix = token.prefix(3).map { $0 | 0x20 }
        return months.firstIndex(of: Array(prefix)).map { $0 + 1 }
    }

    /// The `Set-Cookie` fields of a value joined by a transport that keeps headers in a dictionary
    /// (URLSession joins repeated fields with `", "`). A join is told apart from a cookie's own text
    /// only where it can be: a comma followed by one space, outside double quotes, followed by a
    /// name and `=` before the next `;` or `,`. So `foo="bar, baz=qux"`, `foo=bar; b,az=qux` and an
    /// `Expires` date each stay one cookie; an unquoted value with `", x="` in it is split, which
    /// only a transport that keeps fields apart (``APIRawResponse/values(forHeader:)``) avoids.
    static func splitJoined(_ header: String) -> [String] {
        let bytes = Array(header.utf8)
        var values: [String] = []
        var start = 0
        var quoted = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                quoted.toggle()
            } else if byte == UInt8(ascii: ";") {
                quoted = false  // a quote never spans attributes
            } else if !quoted, byte == UInt8(ascii: ","), index + 1 < bytes.count, bytes[index + 1] == 0x20 {
                let rest = bytes[(index + 2)...]
                let head = rest.prefix { $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: ",") }
                if let equals = head.firstIndex(of: UInt8(ascii: "=")), equals > rest.startIndex,
                    !head[..<equals].contains(0x20)
                {
                    values.append(String(decoding: bytes[start..<index], as: UTF8.self))
                    start = index + 2
                    index += 2
                    continue
                }
            }
            index += 1
        }
        values.append(String(decoding: bytes[start...], as: UTF8.self))
        return values.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    // MARK: Where cookies go (§5.1.3, §5.1.4)

    /// Whether `host` is an IPv4 or IPv6 address (no domain of its own to match against).
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        return labels.count == 4 && labels.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy(isDigit) }
    }

    /// `host` equals `domain`, or is a name below it (never an IP address).
    static func domainMatches(host: String, domain: String) -> Bool {
        if host == domain { return true }
        return !isIPAddress(host) && host.hasSuffix("." + domain)
    }

    /// Whether a `Domain` attribute is too broad to accept (a single label, or a public suffix).
    static func isPublicSuffix(_ domain: String) -> Bool {
        !domain.contains(".") || publicSuffixes.contains(domain)
    }

    /// The path of a URL as cookies match it: `/` when it has none.
    static func requestPath(of url: URL) -> String {
        let path = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path
        return path.hasPrefix("/") ? path : "/"
    }

    /// The default path of a cookie set by a request to `url`: its path up to, not including, the
    /// last `/` (`/` when that leaves nothing).
    static func defaultPath(of url: URL) -> String {
        let path = requestPath(of: url)
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// RFC 6265 §5.1.4's path-match.
    static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        if cookiePath.hasSuffix("/") { return true }
        return requestPath.dropFirst(cookiePath.count).first == "/"
    }
}
