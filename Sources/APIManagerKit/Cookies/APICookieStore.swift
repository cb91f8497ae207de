import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Cookies, kept and sent back as RFC 6265 says: opt in with `APIEngine(cookies: APICookieStore())`.
///
/// The engine then stores every `Set-Cookie` of every response (any status, redirects the transport
/// follows included, on both transports) and adds a `Cookie` header to every request that does not
/// set one itself, with the cookies whose domain, path and `Secure` flag match its URL:
///
/// ```swift
/// let cookies = APICookieStore(fileURL: appSupport.appendingPathComponent("cookies.json"))
/// let engine = APIEngine(cookies: cookies)
/// ```
///
/// - `Domain`, `Path`, `Secure`, `HttpOnly`, `Expires` (the lenient cookie-date of RFC 6265 §5.1.1),
///   `Max-Age` (which wins over `Expires`) and `SameSite` are kept on each ``APICookieStore/Cookie``.
/// - A cookie is never stored for a domain broader than the host that set it allows: the `Domain`
///   must be the host or a domain above it (never for an IP address), and not a single label nor a
///   known public suffix (`co.uk`, `github.io`…; a short built-in list, not the whole Public Suffix
///   List). A `Secure` cookie, or one named `__Secure-…` or `__Host-…`, is only taken from `https`;
///   `__Host-…` also needs `Path=/` and no `Domain`.
/// - Expiry is judged on the clock of the engine that sends the request (``APIEngine/clock``); an
///   expired `Set-Cookie` removes the cookie. At most 4096 bytes per cookie, 50 per domain and 3000
///   in all; past those the least recently used go first (RFC 6265 §5.3: the last time a request
///   carried the cookie, or it was set).
/// - One `Set-Cookie` field is one cookie, whatever commas it holds: the engine keeps fields apart
///   from the transport to the store (`AsyncHTTPClientTransport` and `MockTransport` give them one
///   by one). `URLSessionTransport` cannot: URLSession joins repeated fields with `", "` before
///   anyone reads them, so there a join is told apart only at `", "` outside quotes followed by a
///   name and `=`; a cookie whose unquoted value holds `", x="` is split.
/// - A cookie from `http` never sets or shadows a `Secure` cookie of the same name whose domain and
///   path it matches (RFC 6265bis §5.7 step 16).
/// - With a `fileURL`, cookies that have an expiry (not session cookies) are kept in a JSON file only
///   its owner can read (mode `0600`), rewritten atomically on each change, and read back at start.
/// - A request carrying cookies counts as authenticated for the response cache, like one carrying
///   `Authorization`; `Cookie` is redacted in cURL descriptions and events, and dropped on a
///   redirect to another origin (which gets its own cookies from the store).
///
/// `SameSite` is kept but not enforced: an API client has no page whose site could differ from the
/// request's. Thread-safe; one store may be shared by several engines.
///
/// The `__Secure-` and `__Host-` prefixes are matched without regard to case (`__SECURE-id` too).
public final class APICookieStore: Sendable, Hashable {
    /// Where cookies with an expiry are kept across launches; `nil` for memory only.
    public let fileURL: URL?
    /// The most cookies kept per domain. `50` unless given.
    public let maxCookiesPerDomain: Int
    /// The most cookies kept in all. `3000` unless given.
    public let maxCookies: Int

    private let state: LockedState<State>
    /// The version last written to ``fileURL``; its lock also keeps writes from interleaving.
    private let written = LockedState<UInt64>(0)

    private struct State {
        var cookies: [APICookieStore.Cookie] = []
        var writeError: (any Error)?
        /// Increases with every change, so that an older snapshot is never written over a newer one.
        var version: UInt64 = 0
    }

    /// - Parameters:
    ///   - fileURL: none unless given: cookies live in memory, for the life of the store. With one,
    ///     persistent cookies are read from it now and written to it on each change; a file that
    ///     cannot be read (absent, or not this format) starts the store empty.
    ///   - maxCookiesPerDomain: 50 unless given.
    ///   - maxCookies: 3000 unless given.
    public init(fileURL: URL? = nil, maxCookiesPerDomain: Int = 50, maxCookies: Int = 3000) {
        self.fileURL = fileURL
        self.maxCookiesPerDomain = max(1, maxCookiesPerDomain)
        self.maxCookies = max(1, maxCookies)
        let stored = fileURL.flatMap { try? Data(contentsOf: $0) }.flatMap {
            try? JSONDecoder().decode([APICookieStore.Cookie].self, from: $0)
        }
        self.state = LockedState(State(cookies: (stored ?? []).filter { $0.expires != nil }))
    }

    public static func == (lhs: APICookieStore, rhs: APICookieStore) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Every cookie kept, expired ones included until the next change removes them.
    public var allCookies: [APICookieStore.Cookie] { state.withLock { $0.cookies } }

    /// Why the last write to ``fileURL`` failed; `nil` when it succeeded or there is no file.
    public var lastWriteError: (any Error)? { state.withLock { $0.writeError } }

    /// The cookies a request to `url` carries at `now`, longest path first, then oldest first; their
    /// last-access time becomes `now` (RFC 6265 §5.4 step 3), in memory (the file keeps the time of
    /// the last change).
    public func cookies(for url: URL, at now: Date = Date()) -> [APICookieStore.Cookie] {
        state.withLock { state in
            var matching: [APICookieStore.Cookie] = []
            for index in state.cookies.indices where state.cookies[index].matches(url, at: now) {
                state.cookies[index].lastAccessed = now
                matching.append(state.cookies[index])
            }
            return matching
        }
        .sorted { ($0.path.count, $1.created) > ($1.path.count, $0.created) }
    }

    /// The `Cookie` header value for a request to `url` at `now`; `nil` when no cookie matches.
    public func cookieHeader(for url: URL, at now: Date = Date()) -> String? {
        let matching = cookies(for: url, at: now)
        return matching.isEmpty ? nil : matching.map(\.pair).joined(separator: "; ")
    }

    /// Stores the cookies of the `Set-Cookie` fields received from `url` at `now`: each element is
    /// one field, and one field is one cookie (RFC 6265 §3), whatever commas it holds. A value that
    /// joins several fields (as a header dictionary does) must be split by the caller; the engine
    /// gets the fields apart from the transport (``APIRawResponse/values(forHeader:)``).
    /// Returns how many were stored or removed.
    @discardableResult
    public func store(setCookie values: [String], from url: URL, at now: Date = Date()) -> Int {
        guard let host = url.host?.lowercased(), !host.isEmpty, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { return 0 }
        let isSecureOrigin = scheme == "https"
        let defaultPath = CookieRules.defaultPath(of: url)
        // Parsed and checked against the storage rules before the lock: only the merge needs it.
        let incoming = values.compactMap(CookieRules.parse).compactMap {
            Self.cookie(from: $0, host: host, secureOrigin: isSecureOrigin, defaultPath: defaultPath, now: now)
        }
        guard !incoming.isEmpty else { return 0 }
        let (changed, snapshot) = state.withLock { state -> (Int, (UInt64, [APICookieStore.Cookie])?) in
            var changed = 0
            for cookie in incoming {
                // RFC 6265bis §5.7 step 16: a cookie from an insecure origin leaves a Secure one alone.
                if !isSecureOrigin, state.cookies.contains(where: { $0.isSecure && Self.shadows(cookie, $0) }) {
                    continue
                }
                let isExpired = cookie.expires.map { $0 <= now } ?? false
                if let index = state.cookies.firstIndex(where: {
                    $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path
                }) {
                    // A replacement keeps the creation time; an expired Set-Cookie removes the cookie.
                    let created = state.cookies.remove(at: index).created
                    if !isExpired {
                        var replacement = cookie
                        replacement.created = created
                        replacement.lastAccessed = now
                        state.cookies.append(replacement)
                    }
                } else if isExpired {
                    continue
                } else {
                    state.cookies.append(cookie)
                }
                changed += 1
            }
            guard changed > 0 else { return (0, nil) }
            state.cookies.removeAll { $0.expires.map { $0 <= now } ?? false }
            evict(&state.cookies)
            state.version += 1
            return (changed, (state.version, state.cookies))
        }
        if let (version, cookies) = snapshot { persist(cookies, version: version) }
        return changed
    }

    /// Forgets every cookie (and empties the file).
    public func removeAll() {
        let version = state.withLock { state -> UInt64 in
            state.cookies.removeAll()
            state.version += 1
            return state.version
        }
        persist([], version: version)
    }

    /// Whether `new`, from an insecure origin, would set or shadow the Secure cookie `stored` (RFC
    /// 6265bis §5.7 step 16): the same name, domains that domain-match either way, and the new path
    /// path-matches the stored one.
    private static func shadows(_ new: APICookieStore.Cookie, _ stored: APICookieStore.Cookie) -> Bool {
        stored.name == new.name
            && (CookieRules.domainMatches(host: stored.domain, domain: new.domain)
                || CookieRules.domainMatches(host: new.domain, domain: stored.domain))
            && CookieRules.pathMatches(requestPath: new.path, cookiePath: stored.path)
    }

    /// The cookie a parsed `Set-Cookie` makes for `host`, or `nil` when the storage rules refuse it.
    private static func cookie(
        from parsed: CookieRules.Parsed, host: String, secureOrigin: Bool, defaultPath: String, now: Date
    ) -> APICookieStore.Cookie? {
        // Prefixes (RFC 6265bis §4.1.3) and Secure from a secure origin only.
        if parsed.isSecure && !secureOrigin { return nil }
        // The prefixes are matched without regard to case (RFC 6265bis §5.7 steps 20–21).
        let lowercasedName = parsed.name.lowercased()
        if lowercasedName.hasPrefix("__secure-") && !(parsed.isSecure && secureOrigin) { return nil }
        if lowercasedName.hasPrefix("__host-")
            && !(parsed.isSecure && secureOrigin && parsed.domain == nil && parsed.path == "/")
        {
            return nil
        }
        var domain = host
        var hostOnly = true
        if let attribute = parsed.domain {
            if attribute == host {
                hostOnly = CookieRules.isPublicSuffix(attribute) || CookieRules.isIPAddress(host)
            } else {
                guard !CookieRules.isPublicSuffix(attribute), CookieRules.domainMatches(host: host, domain: attribute)
                else { return nil }
                domain = attribute
                hostOnly = false
            }
        }
        var expires: Date?
        if let maxAge = parsed.maxAge {
            expires =
                maxAge <= 0
                ? Date.distantPast : now.addingTimeInterval(TimeInterval(min(maxAge, 400 * 24 * 3600)))
        } else if let date = parsed.expires {
            // RFC 6265bis caps a lifetime at 400 days.
            expires = min(date, now.addingTimeInterval(400 * 24 * 3600))
        }
        return APICookieStore.Cookie(
            name: parsed.name, value: parsed.value, domain: domain, isHostOnly: hostOnly,
            path: parsed.path ?? defaultPath, isSecure: parsed.isSecure, isHTTPOnly: parsed.isHTTPOnly,
            expires: expires, sameSite: parsed.sameSite, created: now, lastAccessed: now)
    }

    /// Keeps the limits (RFC 6265 §5.3): the least recently used cookies of a crowded domain go
    /// first, then the least recently used of all.
    private func evict(_ cookies: inout [APICookieStore.Cookie]) {
        var perDomain: [String: Int] = [:]
        for cookie in cookies { perDomain[cookie.domain, default: 0] += 1 }
        if perDomain.values.contains(where: { $0 > maxCookiesPerDomain }) {
            cookies.sort { $0.lastUsed < $1.lastUsed }
            var kept: [String: Int] = [:]
            var keep = [Bool](repeating: true, count: cookies.count)
            for (index, cookie) in cookies.enumerated().reversed() {
                kept[cookie.domain, default: 0] += 1
                if kept[cookie.domain, default: 0] > maxCookiesPerDomain { keep[index] = false }
            }
            cookies = cookies.enumerated().filter { keep[$0.offset] }.map(\.element)
        }
        if cookies.count > maxCookies {
            cookies.sort { $0.lastUsed < $1.lastUsed }
            cookies.removeFirst(cookies.count - maxCookies)
        }
    }

    /// Writes the persistent cookies of change `version` to ``fileURL``, owner-only and atomically,
    /// unless a newer change was written already.
    private func persist(_ cookies: [APICookieStore.Cookie], version: UInt64) {
        guard let fileURL else { return }
        let failure: (any Error)?? = written.withLock { written in
            guard version > written else { return nil }
            written = version
            do {
                try FileManager.default.createDirectory(
                    at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try OwnerOnlyFile.write(try encoder.encode(cookies.filter { $0.expires != nil }), to: fileURL)
                return .some(nil)
            } catch {
                return .some(error)
            }
        }
        if let failure { state.withLock { $0.writeError = failure } }
    }
}
