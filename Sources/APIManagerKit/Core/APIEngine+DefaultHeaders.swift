import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// Headers an engine adds to every request that does not set them itself: an API key, a client
    /// name, and by default a `User-Agent` and an `Accept-Language`.
    ///
    /// ```swift
    /// var headers = APIEngine.DefaultHeaders.standard
    /// headers["X-Client"] = "ios"
    /// headers["User-Agent"] = "Shop/2.1 APIManagerKit/\(APIEngine.DefaultHeaders.packageVersion)"
    /// headers["Accept-Language"] = nil                 // removed
    /// let engine = APIEngine(defaultHeaders: headers)  // or .none for no header at all
    /// ```
    ///
    /// Names are matched without regard to case. A request's own header (set by the request,
    /// `configure(_:)` or the manager's `urlRequest(for:)`) wins over a default one; persisted auth
    /// headers are added before them. Names and values are checked like any header: one that could
    /// inject a line fails every request with ``APIError/invalidRequest(reason:underlying:)``.
    public struct DefaultHeaders: Sendable, Hashable {
        /// The headers, by name as given.
        public private(set) var fields: [String: String] {
            didSet { lowercasedNames = Set(fields.keys.map { $0.lowercased() }) }
        }
        /// The names, lower-cased, to compare with a request's own without regard to case.
        private var lowercasedNames: Set<String> = []

        /// The given headers and nothing else.
        public init(_ fields: [String: String] = [:]) {
            self.fields = [:]
            for (name, value) in fields { self[name] = value }
        }

        /// The value for a name, whatever its case; setting `nil` removes it.
        public subscript(name: String) -> String? {
            get { key(for: name).flatMap { fields[$0] } }
            set {
                var changed = fields
                if let existing = key(for: name) { changed[existing] = nil }
                if let newValue { changed[name] = newValue }
                fields = changed
            }
        }

        private func key(for name: String) -> String? {
            let lowercased = name.lowercased()
            return fields.keys.first { $0.lowercased() == lowercased }
        }

        /// No default header.
        public static let none = APIEngine.DefaultHeaders()

        /// The default of every engine: ``userAgent`` and, when the system names preferred languages,
        /// ``acceptLanguage(for:)`` of them.
        public static let standard: APIEngine.DefaultHeaders = {
            var headers = APIEngine.DefaultHeaders(["User-Agent": userAgent])
            headers["Accept-Language"] = acceptLanguage(for: Locale.preferredLanguages)
            return headers
        }()

        /// This package's version, as the default `User-Agent` gives it.
        public static let packageVersion = "1.0.0"

        /// `<program>/<version> APIManagerKit/<version> (<system> <version>)`, for example
        /// `Shop/2.1 APIManagerKit/1.0.0 (Linux 6.1.0)`; the program's version is its bundle's short
        /// version, left out when it has none. Characters a product token cannot hold become `-`.
        public static let userAgent: String = {
            let info = Bundle.main.infoDictionary
            let program = token(
                info?["CFBundleName"] as? String ?? info?["CFBundleExecutable"] as? String
                    ?? ProcessInfo.processInfo.processName)
            let programVersion = (info?["CFBundleShortVersionString"] as? String).map { "/" + token($0) } ?? ""
            let version = ProcessInfo.processInfo.operatingSystemVersion
            let system = "\(systemName) \(version.majorVersion).\(version.minorVersion).\(version.patchVersion)"
            return "\(program)\(programVersion) APIManagerKit/\(packageVersion) (\(system))"
        }()

        private static var systemName: String {
            #if os(iOS)
            return "iOS"
            #elseif os(macOS)
            return "macOS"
            #elseif os(tvOS)
            return "tvOS"
            #elseif os(watchOS)
            return "watchOS"
            #elseif os(visionOS)
            return "visionOS"
            #elseif os(Linux)
            return "Linux"
            #elseif os(Windows)
            return "Windows"
            #else
            return "unknown"
            #endif
        }

        /// Replaces what an RFC 9110 token cannot hold with `-`; `"unknown"` for an empty one.
        private static func token(_ text: String) -> String {
            let allowed = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
            let cleaned = String(text.map { allowed.contains($0) ? $0 : "-" })
            return cleaned.isEmpty ? "unknown" : cleaned
        }

        /// An `Accept-Language` value for languages in order of preference: the first six, with
        /// quality values falling by 0.1 (`"fr-CH, fr;q=0.9, en;q=0.8"`); `nil` for none. A language
        /// that is not a well-formed tag (letters, digits and `-`) is left out.
        public static func acceptLanguage(for languages: [String]) -> String? {
            let tags = languages.filter { tag in
                !tag.isEmpty && tag.count <= 35
                    && tag.unicodeScalars.allSatisfy {
                        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-")
                    }
            }
            guard !tags.isEmpty else { return nil }
            return tags.prefix(6).enumerated().map { index, tag in
                index == 0 ? tag : "\(tag);q=0.\(10 - index)"
            }.joined(separator: ", ")
        }

        /// Adds every header the request does not set itself, in one change of the request (on Linux
        /// each `setValue` costs several thousand instructions).
        func apply(to request: inout URLRequest) {
            guard !fields.isEmpty else { return }
            var headers = request.allHTTPHeaderFields ?? [:]
            if headers.isEmpty {
                request.allHTTPHeaderFields = fields
                return
            }
            var own = Set<String>(minimumCapacity: headers.count)
            for name in headers.keys { own.insert(name.lowercased()) }
            guard !lowercasedNames.isSubset(of: own) else { return }
            for (name, value) in fields where !own.contains(name.lowercased()) { headers[name] = value }
            request.allHTTPHeaderFields = headers
        }
    }
}
