import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the transport's answer to an attempt becomes before a response is built from it.
enum TransportStage {
    /// The transport's answer as an ``APIError`` result: its error wrapped, a body past the limit
    /// refused (for transports that do not enforce it themselves), its URL set to the request's when
    /// the transport gave none, persisted auth headers and cookies captured.
    static func answer(
        _ result: Result<APIRawResponse, any Error>, for sent: Attempt,
        persistedHeaders: APIAuthentication.PersistedHeaders?,
        cookies: APICookieStore?, now: @autoclosure () -> Date
    ) -> Result<APIRawResponse, APIError> {
        var result = result.mapError { error in
            // A relative URL on an engine without a base URL: the transport could not send it.
            if let url = sent.machine.request.url, url.scheme == nil { return BaseURL.missing(for: url) }
            return APIError.wrapTransport(error)
        }
        if case .success(let raw) = result, let limit = sent.task.bag.maxResponseBodySize, raw.body.count > limit {
            result = .failure(.responseTooLarge(limit: limit))
        }
        if case .success(var raw) = result {
            // A transport that does not say where the answer came from answered the request's URL:
            // relative links (`APIRawResponse/links`) resolve against it.
            if raw.url == nil {
                raw.url = sent.machine.request.url
                result = .success(raw)
            }
            persistedHeaders?.capture(from: raw, requestURL: sent.machine.request.url)
            if let cookies, let url = raw.url {
                let fields = raw.setCookieFields
                if !fields.isEmpty { cookies.store(setCookie: fields, from: url, at: now()) }
            }
        }
        return result
    }
}
