import Foundation

extension APICookieStore {
    /// One cookie as an ``APICookieStore`` keeps it (RFC 6265 §5.3): what the server set, and where the
    /// store sends it back.
    public struct Cookie: Sendable, Hashable, Codable {
        /// The `SameSite` attribute (RFC 6265bis), kept as the server gave it.
        public enum SameSite: String, Sendable, Hashable, Codable {
            /// `SameSite=Strict`.
            case strict
            /// `SameSite=Lax`.
            case lax
            /// `SameSite=None`.
            case none
        }

        /// The cookie's name.
        public var name: String
        /// The cookie's value, as the server sent it.
        public var value: String
        /// The host (``isHostOnly``) or the domain whose hosts receive it, lower-cased, without a
        /// leading dot.
        public var domain: String
        /// Whether only the host that set it receives it (no `Domain` attribute).
        public var isHostOnly: Bool
        /// The path whose requests carry it: the `Path` attribute, or the directory of the request that
        /// set it.
        public var path: String
        /// Whether it goes over `https` only (`Secure`).
        public var isSecure: Bool
        /// Whether scripts may not read it (`HttpOnly`); an API client sends it like any other.
        public var isHTTPOnly: Bool
        /// When it expires (`Max-Age`, else `Expires`); `nil` for a session cookie, kept until the store
        /// is released and never written to disk.
        public var expires: Date?
        /// The `SameSite` attribute; `nil` when the server gave none (or one this store does not know).
        public var sameSite: SameSite?
        /// When it was first stored; a replacement keeps the time of the cookie it replaces.
        public var created: Date
        /// When a request last carried it (RFC 6265 §5.4 step 3), or it was last set; `nil` until then
        /// (``created`` stands in). The least recently used cookies are evicted first.
        public var lastAccessed: Date?

        /// A cookie from its parts.
        public init(
            name: String, value: String, domain: String, isHostOnly: Bool = true, path: String = "/",
            isSecure: Bool = false, isHTTPOnly: Bool = false, expires: Date? = nil, sameSite: SameSite? = nil,
            created: Date = Date(), lastAccessed: Date? = nil
        ) {
            self.name = name
            self.value = value
            self.domain = domain
            self.isHostOnly = isHostOnly
            self.path = path
            self.isSecure = isSecure
            self.isHTTPOnly = isHTTPOnly
            self.expires = expires
            self.sameSite = sameSite
            self.created = created
            self.lastAccessed = lastAccessed
        }

        /// When it was last used: ``lastAccessed``, else ``created``.
        var lastUsed: Date { lastAccessed ?? created }

        /// Whether it is sent with a request to `url` at `now` (RFC 6265 §5.4): the host matches its
        /// domain, the path matches its path, `https` when it is secure, and it has not expired.
        public func matches(_ url: URL, at now: Date) -> Bool {
            guard let host = url.host?.lowercased(), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https"
            else { return false }
            if let expires, expires <= now { return false }
            if isSecure && scheme != "https" { return false }
            let hostMatches = isHostOnly ? host == domain : CookieRules.domainMatches(host: host, domain: domain)
            return hostMatches
                && CookieRules.pathMatches(requestPath: CookieRules.requestPath(of: url), cookiePath: path)
        }

        /// `name=value`, as a `Cookie` header carries it.
        var pair: String { name + "=" + value }
    }
}
