import APIManagerKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension MockTransport {
    /// What a stub matches: every condition it gives holds for the request (those left `nil` or empty
    /// hold for any request).
    ///
    /// ```swift
    /// transport.stub(
    ///     MockTransport.Match(.get, "/products/{id}", host: "shop.test", query: .including(["lang": "en"])),
    ///     .json(#"{"id":2,"name":"Kettle"}"#))
    /// let add = MockTransport.Match(.post, "/cart/items", body: .json(#"{"sku":"A","quantity":1}"#))
    /// transport.stub(add, times: 1, .status(201))
    /// ```
    public struct Match: Sendable, CustomStringConvertible {
        /// The method; any when `nil`.
        public var method: HTTPMethod?
        /// The URL's path, with `{name}` segments that match any one non-empty segment
        /// (`/products/{id}`); any when `nil`.
        public var path: String?
        /// The URL's scheme (`https`), compared without case; any when `nil`.
        public var scheme: String?
        /// The URL's host, compared without case; any when `nil`.
        public var host: String?
        /// The URL's port as written in it (`nil` in the URL when it is the scheme's default); any
        /// when `nil`.
        public var port: Int?
        /// The query items (decoded). `.any` unless given.
        public var query: Query
        /// Headers the request must carry with these values (names without case); none unless given.
        public var headers: [String: String]
        /// The body; any when `nil`.
        public var body: Body?

        /// The query items a request must have.
        public enum Query: Sendable, Equatable {
            /// Any query, or none.
            case any
            /// At least these items, with these values (others may be there too).
            case including([String: String])
            /// Exactly these items: no other, each once ( `[:]`: no query at all).
            case exactly([String: String])
        }

        /// The body a request must have.
        public enum Body: Sendable, Equatable {
            /// These bytes exactly.
            case bytes(Data)
            /// JSON equal to this text as values: key order, spacing and number spelling aside.
            case json(String)
            /// An `application/x-www-form-urlencoded` body with at least these fields (decoded).
            case form([String: String])
        }

        /// A match; every condition has its default given with its property.
        public init(
            _ method: HTTPMethod? = nil, _ path: String? = nil, scheme: String? = nil, host: String? = nil,
            port: Int? = nil, query: Query = .any, headers: [String: String] = [:], body: Body? = nil
        ) {
            self.method = method
            self.path = path
            self.scheme = scheme
            self.host = host
            self.port = port
            self.query = query
            self.headers = headers
            self.body = body
        }

        /// Whether `request` meets every condition.
        public func matches(_ request: URLRequest) -> Bool {
            guard let url = request.url else { return false }
            if let method, method.rawValue != (request.httpMethod ?? "GET") { return false }
            if let scheme, url.scheme?.lowercased() != scheme.lowercased() { return false }
            if let host, url.host?.lowercased() != host.lowercased() { return false }
            if let port, url.port != port { return false }
            // The path as written, decoded (`URL.path` would drop a trailing `/`).
            let written = URLComponents(url: url, resolvingAgainstBaseURL: true)?.path ?? url.path
            if let path, !Self.path(written, matches: path) { return false }
            if !Self.query(of: url, meets: query) { return false }
            for (name, value) in headers where request.value(forHTTPHeaderField: name) != value { return false }
            if let body, !Self.body(request.httpBody ?? Data(), meets: body) { return false }
            return true
        }

        /// `GET /products/{id} host shop.test query including [lang=en]`, for the unmatched error.
        public var description: String {
            var parts = ["\(method?.rawValue ?? "any") \(path ?? "any path")"]
            if let scheme { parts.append("scheme \(scheme)") }
            if let host { parts.append("host \(host)") }
            if let port { parts.append("port \(port)") }
            switch query {
            case .any: break
            case .including(let items): parts.append("query including \(Self.describe(items))")
            case .exactly(let items): parts.append("query exactly \(Self.describe(items))")
            }
            if !headers.isEmpty { parts.append("headers \(Self.describe(headers))") }
            switch body {
            case nil: break
            case .bytes(let data)?: parts.append("body of \(data.count) bytes")
            case .json(let text)?: parts.append("JSON body \(text)")
            case .form(let fields)?: parts.append("form body including \(Self.describe(fields))")
            }
            return parts.joined(separator: " ")
        }

        // MARK: The rules

        static func path(_ path: String, matches template: String) -> Bool {
            let given = path.split(separator: "/", omittingEmptySubsequences: false)
            let wanted = template.split(separator: "/", omittingEmptySubsequences: false)
            guard given.count == wanted.count else { return false }
            return zip(given, wanted).allSatisfy { segment, pattern in
                pattern.hasPrefix("{") && pattern.hasSuffix("}") && pattern.count > 2
                    ? !segment.isEmpty : segment == pattern
            }
        }

        static func query(of url: URL, meets rule: Query) -> Bool {
            let items = URLComponents(url: url, resolvingAgainstBaseURL: true)?.queryItems ?? []
            switch rule {
            case .any:
                return true
            case .including(let wanted):
                return wanted.allSatisfy { name, value in
                    items.contains { $0.name == name && ($0.value ?? "") == value }
                }
            case .exactly(let wanted):
                guard items.count == wanted.count, Set(items.map(\.name)).count == items.count else { return false }
                return items.allSatisfy { wanted[$0.name] == ($0.value ?? "") }
            }
        }

        static func body(_ data: Data, meets rule: Body) -> Bool {
            switch rule {
            case .bytes(let wanted):
                return data == wanted
            case .json(let text):
                guard let given = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
                    let wanted = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
                else { return false }
                return JSONValue(given) == JSONValue(wanted)
            case .form(let wanted):
                let fields = formFields(String(decoding: data, as: UTF8.self))
                return wanted.allSatisfy { name, value in fields.contains { $0.0 == name && $0.1 == value } }
            }
        }

        /// The fields of a form body: `+` is a space, then percent-decoding (WHATWG URL, §5.1).
        static func formFields(_ body: String) -> [(String, String)] {
            body.split(separator: "&").map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                func decode(_ text: Substring) -> String {
                    let spaced = text.replacingOccurrences(of: "+", with: " ")
                    return spaced.removingPercentEncoding ?? spaced
                }
                return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
            }
        }

        private static func describe(_ items: [String: String]) -> String {
            "[" + items.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") + "]"
        }
    }

    /// A JSON value, compared as a value: objects without key order, numbers by value.
    enum JSONValue: Equatable {
        case null
        case bool(Bool)
        case number(Double)
        case string(String)
        case array([JSONValue])
        case object([String: JSONValue])
        /// Something `JSONSerialization` did not make: never equal.
        case other

        init(_ value: Any) {
            switch value {
            case is NSNull: self = .null
            case let string as String: self = .string(string)
            case let array as [Any]: self = .array(array.map(JSONValue.init))
            case let object as [String: Any]: self = .object(object.mapValues(JSONValue.init))
            case let bool as Bool where Self.isBool(value): self = .bool(bool)
            case let number as NSNumber: self = .number(number.doubleValue)
            default: self = .other
            }
        }

        static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): return true
            case (.bool(let a), .bool(let b)): return a == b
            case (.number(let a), .number(let b)): return a == b
            case (.string(let a), .string(let b)): return a == b
            case (.array(let a), .array(let b)): return a == b
            case (.object(let a), .object(let b)): return a == b
            case (.null, _), (.bool, _), (.number, _), (.string, _), (.array, _), (.object, _), (.other, _):
                return false
            }
        }

        /// Whether `JSONSerialization` read a `true` or `false` (a boolean `NSNumber`), not a number.
        private static func isBool(_ value: Any) -> Bool {
            #if canImport(Darwin)
            guard let number = value as? NSNumber else { return false }
            return CFGetTypeID(number) == CFBooleanGetTypeID()
            #else
            return type(of: value) == Bool.self
                || (value as? NSNumber).map { String(cString: $0.objCType) == "c" } ?? false
            #endif
        }
    }
}
