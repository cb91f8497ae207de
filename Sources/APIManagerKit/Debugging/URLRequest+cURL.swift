import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// The request as a `curl` command line that can be pasted into a shell.
    ///
    /// Secrets are replaced with `***` unless `revealingSecrets` is `true`: the values of
    /// `Authorization`, `Proxy-Authorization`, `Cookie`, of headers whose names contain `token`,
    /// `secret`, `password`, `api-key`, `apikey`, `auth` or `session`, of the names in
    /// `sensitiveHeaders`, and a password in the URL. The same rule decides which headers a
    /// redirect to another origin drops and which requests count as authenticated for the cache.
    public func cURLDescription(revealingSecrets: Bool = false, sensitiveHeaders: Set<String> = []) -> String {
        var parts = ["curl"]
        let method = httpMethod ?? "GET"
        if method != "GET" { parts.append("-X \(method)") }
        let extra = Set(sensitiveHeaders.map { $0.lowercased() })
        for (name, value) in (allHTTPHeaderFields ?? [:]).sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
            let shown = !revealingSecrets && CredentialHeaders.isCredential(name, marked: extra) ? "***" : value
            parts.append("-H " + CURLCommand.quote("\(name): \(shown)"))
        }
        if let body = httpBody, !body.isEmpty {
            if let text = String(data: body, encoding: .utf8) {
                parts.append("--data-raw " + CURLCommand.quote(text))
            } else {
                parts.append("--data-binary @- # \(body.count) bytes of binary data")
            }
        }
        let target = url.map { revealingSecrets ? $0.absoluteString : CURLCommand.redactedURL($0) } ?? ""
        parts.append(CURLCommand.quote(target))
        return parts.joined(separator: " \\\n\t")
    }
}

extension APIRequest {
    /// This request's `URLRequest` as a `curl` command, with its secrets (``authorization`` among
    /// them) redacted unless `revealingSecrets` is `true`; see
    /// `URLRequest.cURLDescription(revealingSecrets:sensitiveHeaders:)`.
    public func cURLDescription(revealingSecrets: Bool = false) throws(APIError) -> String {
        let sensitive: Set<String> = authorization.map { [$0.header.name] } ?? []
        return try makeURLRequest().cURLDescription(revealingSecrets: revealingSecrets, sensitiveHeaders: sensitive)
    }
}

enum CURLCommand {
    /// Single-quoted for a POSIX shell.
    static func quote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// The URL with any password replaced by `***`.
    static func redactedURL(_ url: URL) -> String {
        guard url.password != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        components.password = "***"
        return components.string ?? url.absoluteString
    }
}
