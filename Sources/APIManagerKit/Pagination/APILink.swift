import Foundation

/// One link of a `Link` header (RFC 8288): a target, its relation types and its other parameters.
///
/// ```swift
/// // Link: <https://api.github.com/repositories/1/issues?page=2>; rel="next", <…?page=5>; rel="last"
/// let next = raw.link(relation: "next")
/// ```
public struct APILink: Sendable, Hashable {
    /// The target, resolved against the response's URL when the header gives a relative one.
    public let target: URL
    /// The relation types of `rel`, lower-cased (`rel="next last"` gives both); empty without `rel`.
    public let relations: [String]
    /// Every parameter by lower-cased name, the first occurrence of each (RFC 8288 §3); a parameter
    /// without a value maps to `""`.
    public let parameters: [String: String]

    /// A link from its parts.
    public init(target: URL, relations: [String], parameters: [String: String] = [:]) {
        self.target = target
        self.relations = relations
        self.parameters = parameters
    }

    /// The links of a `Link` header value (several header fields joined with commas are one value),
    /// in order. A link whose target is not a URL, or that is malformed (no `<…>`, a quoted string
    /// that never ends), is left out; the rest of the value is still read. An empty parameter (a
    /// trailing or doubled `;`) is dropped and its link kept.
    public static func parse(_ value: String, relativeTo base: URL? = nil) -> [APILink] {
        var reader = LinkReader(Array(value.unicodeScalars))
        var links: [APILink] = []
        while !reader.isAtEnd {
            if let link = reader.readLink(relativeTo: base) { links.append(link) }
        }
        return links
    }
}

extension APIRawResponse {
    /// The links of the response's `Link` header (RFC 8288), relative targets resolved against
    /// ``url``; empty without the header.
    public var links: [APILink] {
        guard let value = value(forHeader: "Link") else { return [] }
        return APILink.parse(value, relativeTo: url)
    }

    /// The target of the first link with the relation type (`"next"`, `"last"`…), compared without
    /// regard to case; `nil` when there is none.
    public func link(relation: String) -> URL? {
        let relation = relation.lowercased()
        return links.first { $0.relations.contains(relation) }?.target
    }
}

/// Reads `link-value`s one at a time; on malformed input it skips to the next comma outside quotes
/// and angle brackets, so one bad link never hides the others.
private struct LinkReader {
    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

    var isAtEnd: Bool { index >= scalars.count }

    mutating func readLink(relativeTo base: URL?) -> APILink? {
        skip { $0 == " " || $0 == "\t" || $0 == "," }
        guard !isAtEnd else { return nil }
        guard scalars[index] == "<", let close = scalars[index...].firstIndex(of: ">") else {
            skipToNextLink()
            return nil
        }
        let reference = String(String.UnicodeScalarView(scalars[(index + 1)..<close]))
        index = close + 1
        var parameters: [String: String] = [:]
        while true {
            skip { $0 == " " || $0 == "\t" }
            if isAtEnd || scalars[index] == "," { break }
            guard scalars[index] == ";" else {
                skipToNextLink()
                return nil
            }
            index += 1
            skip { $0 == " " || $0 == "\t" }
            // An empty parameter (`…; rel="next";`, `;;`) is dropped and the link kept, as RFC
            // 8288 Appendix B's algorithm and Python requests do.
            if isAtEnd || scalars[index] == "," || scalars[index] == ";" { continue }
            let name = readToken().lowercased()
            guard !name.isEmpty else {
                skipToNextLink()
                return nil
            }
            skip { $0 == " " || $0 == "\t" }
            var value = ""
            if !isAtEnd && scalars[index] == "=" {
                index += 1
                skip { $0 == " " || $0 == "\t" }
                if !isAtEnd && scalars[index] == "\"" {
                    guard let quoted = readQuotedString() else { return nil }  // unterminated: the rest is gone
                    value = quoted
                } else {
                    value = readToken()
                }
            }
            if parameters[name] == nil { parameters[name] = value }
        }
        let trimmed = reference.trimmingCharacters(in: .whitespaces)
        guard let target = URL(string: trimmed, relativeTo: base)?.absoluteURL, target.scheme != nil else {
            return nil
        }
        let relations = (parameters["rel"] ?? "").lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" })
            .map(String.init)
        return APILink(target: target, relations: relations, parameters: parameters)
    }

    private mutating func skip(while matches: (Unicode.Scalar) -> Bool) {
        while !isAtEnd && matches(scalars[index]) { index += 1 }
    }

    /// An RFC 9110 token.
    private mutating func readToken() -> String {
        let start = index
        skip { scalar in
            scalar.isASCII
                && (CharacterSet.alphanumerics.contains(scalar) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
        }
        return String(String.UnicodeScalarView(scalars[start..<index]))
    }

    /// A quoted string from its opening quote, backslash escapes undone; `nil` (at the end of the
    /// input) when it never closes.
    private mutating func readQuotedString() -> String? {
        index += 1
        var text = String.UnicodeScalarView()
        while !isAtEnd {
            let scalar = scalars[index]
            index += 1
            if scalar == "\"" { return String(text) }
            if scalar == "\\" {
                guard !isAtEnd else { return nil }
                text.append(scalars[index])
                index += 1
            } else {
                text.append(scalar)
            }
        }
        return nil
    }

    /// Past the next comma that is outside a quoted string and outside `<…>`.
    private mutating func skipToNextLink() {
        var quoted = false
        var bracketed = false
        while !isAtEnd {
            let scalar = scalars[index]
            index += 1
            if quoted {
                if scalar == "\\" {
                    index += 1
                } else if scalar == "\"" {
                    quoted = false
                }
            } else if scalar == "\"" {
                quoted = true
            } else if scalar == "<" {
                bracketed = true
            } else if scalar == ">" {
                bracketed = false
            } else if scalar == "," && !bracketed {
                return
            }
        }
    }
}
