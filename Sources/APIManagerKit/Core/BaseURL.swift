import Foundation

/// How a request's relative URL joins the engine's base URL (``APIEngine/Configuration/baseURL``):
/// the base's path is kept and the request's path follows it after exactly one `/`, whether either
/// side has a slash there: `https://api.example.com/v1` or `…/v1/`, with `products/2` or
/// `/products/2`, all give `https://api.example.com/v1/products/2`. The base's query comes first,
/// the request's after it. An empty path gives the base as it is.
///
/// Not RFC 3986's reference resolution on purpose: there `/products/2` would replace the base's
/// path (`https://api.example.com/products/2`) and a base without a trailing slash would lose its
/// last segment, the surprise behind many clients' "base_url strips my path" reports (Retrofit,
/// AFNetworking, httpx, which now keeps the base's path as this does). A request that must leave
/// the base's path gives an absolute `url`.
enum BaseURL {
    /// The failure of a request whose URL is relative (`url`) sent by an engine without a base URL.
    static func missing(for url: URL) -> APIError {
        .invalidRequest(
            reason: "the request's URL \"\(APISecrets.redacted(url))\" is relative (no scheme) and the engine has "
                + "no base URL: set APIEngine.Configuration.baseURL, or give the request an absolute url")
    }

    /// `relative` (no scheme) joined to `base`; a network-path reference (`//host/path`) takes only
    /// the base's scheme.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when the base has no `http` or
    ///   `https` scheme and host, or the result is not a valid URL.
    static func join(_ relative: URL, to base: URL) throws(APIError) -> URL {
        guard var joined = URLComponents(url: base, resolvingAgainstBaseURL: true),
            let scheme = joined.scheme?.lowercased(), scheme == "http" || scheme == "https",
            joined.host?.isEmpty == false
        else {
            throw .invalidRequest(
                reason: "the engine's base URL \(APISecrets.redacted(base)) is not an absolute http or https URL "
                    + "(APIEngine.Configuration.baseURL)")
        }
        guard let reference = URLComponents(url: relative, resolvingAgainstBaseURL: false) else {
            throw .invalidRequest(reason: "the request's URL \(APISecrets.redacted(relative)) cannot be parsed")
        }
        if let host = reference.host, !host.isEmpty {
            // `//cdn.example.com/path`: another host, the base's scheme.
            var other = reference
            other.scheme = scheme
            return try url(of: other, from: relative, base: base)
        }
        var path = Substring(reference.percentEncodedPath)
        if path.hasPrefix("./") { path = path.dropFirst(2) }
        while path.hasPrefix("/") { path = path.dropFirst() }
        if !path.isEmpty {
            var basePath = Substring(joined.percentEncodedPath)
            while basePath.hasSuffix("/") { basePath = basePath.dropLast() }
            joined.percentEncodedPath = basePath + "/" + path
        }
        if let query = reference.percentEncodedQuery, !query.isEmpty {
            let existing = joined.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
            joined.percentEncodedQuery = existing + query
        }
        joined.percentEncodedFragment = nil
        return try url(of: joined, from: relative, base: base)
    }

    private static func url(of components: URLComponents, from relative: URL, base: URL) throws(APIError) -> URL {
        guard let url = components.url else {
            throw .invalidRequest(
                reason: "the request's URL \(APISecrets.redacted(relative)) does not form a valid URL with the "
                    + "base URL \(APISecrets.redacted(base))")
        }
        return url
    }
}
