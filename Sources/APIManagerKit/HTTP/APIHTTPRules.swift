import Foundation

/// The HTTP rules every transport applies alike, written once (the redirect rule is
/// `APITransportOptions/redirectRequest(_:from:)`). ``URLSessionTransport`` and
/// `AsyncHTTPClientTransport` both call these; a transport of your own should too.
public enum APIHTTPRules {
    /// Whether a URL may be sent or followed: `http` and `https` only (an API client must never read
    /// a `file://` URL or speak FTP). Anything else fails with `URLError(.unsupportedURL)`.
    public static func isSendable(_ url: URL?) -> Bool {
        guard let scheme = url?.scheme?.lowercased() else { return false }
        return scheme == "http" || scheme == "https"
    }

    /// Whether a response has no body whatever its `Content-Length` says (RFC 9110 §6.4.1): the
    /// answer to a `HEAD`, and a `1xx`, `204` or `304`.
    public static func hasNoBody(method: String?, status: Int) -> Bool {
        method?.uppercased() == "HEAD" || status < 200 || status == 204 || status == 304
    }

    /// Whether a redirect goes on as a `GET` without a body: a `303` (but for `HEAD`), or a `301` or
    /// `302` answering a `POST`, as browsers and both transports do.
    public static func redirectBecomesGET(status: Int, method: String?) -> Bool {
        let method = method?.uppercased() ?? "GET"
        return status == 303 && method != "HEAD" || (status == 301 || status == 302) && method == "POST"
    }

    /// The failure of a redirect that would send a streamed body again (a `307` or `308`, or a
    /// redirect that keeps a `PUT`) when the transport cannot: a stream is read once, and sending it
    /// again would send it empty or short (and URLSession on Linux cannot send a file body again
    /// either: it waits for a body it never sends). `nil` when the redirect may be followed.
    public static func streamBodyRedirectFailure(status: Int, method: String?, sendsStreamOnce: Bool) -> APIError? {
        guard sendsStreamOnce, [301, 302, 307, 308].contains(status),
            !redirectBecomesGET(status: status, method: method)
        else { return nil }
        return .invalidRequest(
            reason: "the server redirected (\(status)) a request whose streamed body the transport cannot "
                + "send again")
    }

    /// The content codings of a `Content-Encoding` value, lower-cased, without `identity`.
    public static func contentCodings(_ contentEncoding: String?) -> [String] {
        guard let contentEncoding else { return [] }
        return contentEncoding.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
    }

    /// Whether a body announced at `length` bytes (without a content coding: a compressed body is
    /// limited after decompression) is refused at its head, before any of it arrives.
    public static func isRefusedAtHead(announcedLength length: Int64, codings: [String], limit: Int?) -> Bool {
        guard let limit, codings.isEmpty else { return false }
        return length > Int64(limit)
    }
}
