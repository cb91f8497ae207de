import Foundation

/// Scheme, host and port: what a redirect must keep for credentials to follow it.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: Int?

    init?(_ url: URL?) {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil)
    }
}
