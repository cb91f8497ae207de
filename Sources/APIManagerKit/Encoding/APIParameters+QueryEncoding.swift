import Foundation

extension APIParameters {
    /// How parameters are written as `name=value` pairs, in a query string or a form body.
    ///
    /// Keys are sorted, so the same parameters always give the same URL (and the same cache key).
    /// Nested objects become `a[b]=c`; arrays follow ``arrays``; names and values are percent-encoded
    /// (everything but RFC 3986's unreserved characters).
    public struct QueryEncoding: Sendable, Hashable {
        /// How an array is written.
        public enum ArrayEncoding: Sendable, Hashable {
            /// `tags[]=a&tags[]=b`. The default.
            case brackets
            /// `tags=a&tags=b`.
            case repeatedKey
            /// `tags[0]=a&tags[1]=b`.
            case indexed
        }

        /// How a boolean is written.
        public enum BoolEncoding: Sendable, Hashable {
            /// `true` / `false`. The default.
            case literal
            /// `1` / `0`.
            case numeric
        }

        /// How ``APIValue/null`` is written.
        public enum NullEncoding: Sendable, Hashable {
            /// The key is left out. The default.
            case dropKey
            /// `key=`: the key is kept with an empty value.
            case emptyValue
            /// `key`: the key alone, without `=`.
            case keyOnly
        }

        /// `.brackets` unless set.
        public var arrays: ArrayEncoding
        /// `.literal` unless set.
        public var bools: BoolEncoding
        /// `.dropKey` unless set.
        public var nulls: NullEncoding

        /// An encoding; each default is given with its property.
        public init(arrays: ArrayEncoding = .brackets, bools: BoolEncoding = .literal, nulls: NullEncoding = .dropKey) {
            self.arrays = arrays
            self.bools = bools
            self.nulls = nulls
        }

        /// Brackets for arrays, `true`/`false`, nulls dropped.
        public static let `default` = APIParameters.QueryEncoding()

        /// The percent-encoded `name=value` pairs joined with `&`, keys sorted.
        ///
        /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` for a NaN or infinite number, which
        ///   has no text a server could read back (JSON rejects it the same way), and for a file, which
        ///   only a `multipart/form-data` body can carry.
        public func encode(_ parameters: [String: APIValue]) throws(APIError) -> String {
            var pairs: [String] = []
            for (name, leaf) in try leaves(of: parameters) {
                switch leaf {
                case .text(let text): pairs.append(Self.escape(name) + "=" + Self.escape(text))
                case .keyOnly: pairs.append(Self.escape(name))
                case .file:
                    throw .invalidRequest(
                        reason: "the parameter \"\(name)\" is a file, which only a multipart/form-data body can carry")
                }
            }
            return pairs.joined(separator: "&")
        }

        /// One named value of the flattened parameters.
        enum Leaf {
            case text(String)
            /// A null written as the key alone (``NullEncoding/keyOnly``).
            case keyOnly
            case file(APIFile)
        }

        /// The parameters flattened to named leaves, keys sorted: nested objects as `a[b]`, arrays as
        /// ``arrays`` says, booleans and nulls as ``bools`` and ``nulls`` say. The form encoder and the
        /// multipart encoder share it.
        func leaves(of parameters: [String: APIValue]) throws(APIError) -> [(name: String, leaf: Leaf)] {
            var leaves: [(name: String, leaf: Leaf)] = []
            for key in parameters.keys.sorted() {
                if let value = parameters[key] { try append(value, named: key, to: &leaves) }
            }
            return leaves
        }

        private func append(_ value: APIValue, named name: String, to leaves: inout [(name: String, leaf: Leaf)])
            throws(APIError)
        {
            switch value {
            case .object(let members):
                for key in members.keys.sorted() {
                    if let member = members[key] { try append(member, named: "\(name)[\(key)]", to: &leaves) }
                }
            case .array(let elements):
                for (index, element) in elements.enumerated() {
                    let elementName: String
                    switch arrays {
                    case .brackets: elementName = "\(name)[]"
                    case .repeatedKey: elementName = name
                    case .indexed: elementName = "\(name)[\(index)]"
                    }
                    try append(element, named: elementName, to: &leaves)
                }
            case .null:
                switch nulls {
                case .dropKey: break
                case .emptyValue: leaves.append((name, .text("")))
                case .keyOnly: leaves.append((name, .keyOnly))
                }
            case .bool(let bool) where bools == .numeric:
                leaves.append((name, .text(bool ? "1" : "0")))
            case .double(let number) where !number.isFinite:
                throw .invalidRequest(reason: "the parameter \"\(name)\" is \(number), which has no query or form form")
            case .string, .int, .double, .bool:
                leaves.append((name, .text(value.scalarText ?? "")))
            case .file(let file):
                leaves.append((name, .file(file)))
            }
        }

        /// Percent-encodes everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`).
        static func escape(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .apiUnreserved) ?? ""
        }
    }
}

extension CharacterSet {
    /// RFC 3986 §2.3 unreserved characters.
    static let apiUnreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
