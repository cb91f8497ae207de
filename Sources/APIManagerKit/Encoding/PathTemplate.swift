import Foundation

/// Fills `{name}` placeholders in a path, each value percent-encoded as one path segment.
enum PathTemplate {
    /// - Parameters:
    ///   - path: the template, for example `"users/{id}/items"`.
    ///   - parameters: the resolved parameters; a placeholder takes its value from the path values,
    ///     else from the parameters placed by method (which it consumes).
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` for an unclosed brace, a missing or
    ///   non-scalar value, a value that is `.` or `..`, or a path value that names no placeholder.
    static func fill(_ path: String, with parameters: inout ResolvedParameters) throws(APIError) -> String {
        guard !path.isEmpty || !parameters.path.isEmpty else { return "" }
        guard path.contains("{") || !parameters.path.isEmpty else { return escapeLiteral(path) }
        var result = ""
        var used: Set<String> = []
        var rest = path[...]
        while let open = rest.firstIndex(of: "{") {
            result += escapeLiteral(String(rest[..<open]))
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw .invalidRequest(reason: "the path \"\(path)\" has a \"{\" without a closing \"}\"")
            }
            let name = String(rest[rest.index(after: open)..<close])
            let value: APIValue
            if let pathValue = parameters.path[name] {
                value = pathValue
            } else if let methodValue = parameters.byMethod.removeValue(forKey: name) {
                value = methodValue
            } else {
                throw .invalidRequest(reason: "the path \"\(path)\" needs a value for \"{\(name)}\"")
            }
            guard let text = value.scalarText, !text.isEmpty else {
                throw .invalidRequest(
                    reason: "the value for \"{\(name)}\" in the path \"\(path)\" must be a non-empty string, number "
                        + "or boolean, not \(value)")
            }
            // "." and ".." would be read as a path step (RFC 3986 §5.2.4), not as a segment: the
            // value could climb out of its place ("users/{id}/items" with ".." reaching "/items").
            guard text != ".", text != ".." else {
                throw .invalidRequest(
                    reason: "the value for \"{\(name)}\" in the path \"\(path)\" is \"\(text)\", which would move "
                        + "the path instead of filling one segment")
            }
            used.insert(name)
            result += APIParameters.QueryEncoding.escape(text)
            rest = rest[rest.index(after: close)...]
        }
        result += escapeLiteral(String(rest))
        if let unused = parameters.path.keys.sorted().first(where: { !used.contains($0) }) {
            throw .invalidRequest(reason: "the path parameter \"\(unused)\" matches no \"{\(unused)}\" in \"\(path)\"")
        }
        return result
    }

    private static func escapeLiteral(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .apiPathAllowed) ?? text
    }
}

extension CharacterSet {
    /// Characters left as they are in a path: RFC 3986 `pchar` plus `/`.
    static let apiPathAllowed: CharacterSet = {
        var set = CharacterSet.urlPathAllowed
        set.remove(charactersIn: "?#")
        return set
    }()
}
