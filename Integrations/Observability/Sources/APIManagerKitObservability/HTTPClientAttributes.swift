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
    static let methodOriginal = "http.request.method_original"
    static let protocolVersion = "network.protocol.version"
    /// The library's own, for what the conventions do not name.
    static let taskIdentifier = "apimanager.task.id"
    static let attempt = "apimanager.attempt"
    static let policy = "apimanager.policy"
    static let scope = "apimanager.scope"
    static let responseSource = "apimanager.response.source"
    static let sharedWith = "apimanager.shared_with"

    /// The methods the conventions name, as they are written (method names are case-sensitive);
    /// any other is `_OTHER`.
    private static let knownMethods: Set<String> = [
        "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "QUERY",
    ]

    /// A request's method as the conventions want it.
    struct Method: Equatable {
        /// `http.request.method`: a known method as written, else `_OTHER`.
        let attribute: String
        /// `http.request.method_original`: the method as sent, when it is not the attribute.
        let original: String?
        /// A client span's name: the known method, else `HTTP`.
        var spanName: String { original == nil ? attribute : "HTTP" }
    }

    /// The method of `request` (`GET` when it names none) as the conventions want it.
    static func method(of request: URLRequest) -> Method { method(request.httpMethod ?? "GET") }

    static func method(_ sent: String) -> Method {
        knownMethods.contains(sent)
            ? Method(attribute: sent, original: nil) : Method(attribute: "_OTHER", original: sent)
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

    /// An error as the library describes its kind, for a span's recorded error: the status and
    /// phrase of an answer, never what the server wrote (a body's message, a decoding error's
    /// values) nor an underlying error's text, which may quote the server.
    struct OwnDescription: Error, CustomStringConvertible {
        let description: String

        init(_ error: APIError) {
            switch error {
            case .unacceptableStatus(let response, _):
                description = APIError.unacceptableStatus(response, message: nil).description
            case .decoding(_, let response):
                description = "The response (status \(response.statusCode)) could not be decoded."
            case .rejected(_, let response):
                description = "The response (status \(response.statusCode)) was rejected."
            case .transport(let error as URLError):
                description = "The request failed to reach the server (URLError \(error.code.rawValue))."
            case .transport:
                description = "The request failed to reach the server."
            case .invalidRequest:
                description = "The request is invalid."
            case .authenticationFailed:
                description = "The server refused the credential and it could not be refreshed."
            case .durableStore:
                description = "The durable task was not kept on disk."
            default:
                // The library's own words, with nothing of a server's or another error's.
                description = error.description
            }
        }
    }
}
