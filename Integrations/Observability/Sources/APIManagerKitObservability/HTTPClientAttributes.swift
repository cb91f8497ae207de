import APIManagerKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The names OpenTelemetry's semantic conventions give an HTTP client's request
/// (https://opentelemetry.io/docs/specs/semconv/http/http-spans/ and `http-metrics`), and the
/// values an attempt gives them: written once, read by the logger, the metrics and the spans.
enum HTTPClientAttributes {
    static let method = "http.request.method"
    static let urlFull = "url.full"
    static let serverAddress = "server.address"
    static let serverPort = "server.port"
    static let statusCode = "http.response.status_code"
    static let errorType = "error.type"
    static let resendCount = "http.request.resend_count"
    /// The library's own, for what the conventions do not name.
    static let taskIdentifier = "apimanager.task.id"
    static let attempt = "apimanager.attempt"
    static let policy = "apimanager.policy"
    static let scope = "apimanager.scope"

    /// The methods the conventions name; any other is `_OTHER`.
    private static let knownMethods: Set<String> = [
        "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "QUERY",
    ]

    /// The method as the conventions want it: the known ones, else `_OTHER`.
    static func method(of request: URLRequest) -> String {
        let method = (request.httpMethod ?? "GET").uppercased()
        return knownMethods.contains(method) ? method : "_OTHER"
    }

    /// The server's host and port (the scheme's default when the URL names none).
    static func server(of request: URLRequest) -> (address: String, port: Int?) {
        guard let url = request.url else { return ("", nil) }
        let port =
            url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil)
        return (url.host ?? "", port)
    }

    /// The error's type for `error.type`: the status code for a `4xx`/`5xx` answer, else the kind of
    /// ``APIError``.
    static func errorType(of error: APIError) -> String {
        switch error {
        case .unacceptableStatus(let response, _): return String(response.statusCode)
        case .cancelled: return "cancelled"
        case .ignored: return "ignored"
        case .timedOut: return "timeout"
        case .transport: return "transport"
        case .invalidRequest: return "invalid_request"
        case .decoding: return "decoding"
        case .rejected: return "rejected"
        case .responseTooLarge: return "response_too_large"
        case .authenticationFailed: return "authentication_failed"
        case .lineFull: return "line_full"
        case .waitedTooLong: return "waited_too_long"
        case .circuitOpen: return "circuit_open"
        case .durableStore: return "durable_store"
        @unknown default: return "_OTHER"
        }
    }

    /// `error.type` of an attempt: its status when `4xx`/`5xx`, the error's kind when it failed;
    /// `nil` for a success.
    static func errorType(of report: APIEngine.AttemptReport) -> String? {
        switch report.result {
        case .success(let response): return response.statusCode >= 400 ? String(response.statusCode) : nil
        case .failure(let error): return errorType(of: error)
        }
    }
}
