import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The first stage of an attempt: the `URLRequest`, built by the manager's `urlRequest(for:)`
/// (which encodes the body), with the persisted auth headers and the engine's default headers
/// added. No header may inject lines into the request: the request's own are checked here, the
/// engine's default ones once, when the engine was made (``refusal(of:)``); what the persisted
/// headers, a cookie, the credential and the interceptors add is checked once they have had their
/// say, by ``check(_:hasUncheckedHeaders:totalTimeout:)``, which also refuses a timeout that is
/// not a positive, finite number of seconds.
enum BuildRequestStage {
    /// The request to send, the header names that carry its credentials, and whether headers
    /// nobody checked yet were added (persisted ones, a cookie).
    struct Built {
        var request: URLRequest
        var sensitiveHeaders: Set<String>
        var hasUncheckedHeaders: Bool
    }

    static func run(
        _ task: AnyAPITask, baseURL: URL?, persistedHeaders: APIAuthentication.PersistedHeaders?,
        defaultHeaders: APIEngine.DefaultHeaders, defaultHeadersRefusal: APIError?,
        cookies: APICookieStore?, defersForms: Bool, now: @autoclosure () -> Date
    ) -> Result<Built, APIError> {
        do throws(APIError) {
            var request = try defersForms ? makeDeferringForms(task) : task.makeURLRequest()
            // Its own headers (the request's, `configure(_:)`'s, `urlRequest(for:)`'s); those added
            // below are checked as they are set, or were when the engine was made.
            try HTTPFieldValidation.validate(request)
            if let defaultHeadersRefusal { throw defaultHeadersRefusal }
            // A relative URL (a request that gave only its path) joins the engine's base URL. Without
            // one it is left as it is: the transport refuses it, and ``TransportStage`` says why
            // (reading a built URL's scheme costs several hundred instructions on Linux).
            if let baseURL, let url = request.url, url.scheme == nil {
                request.url = try BaseURL.join(url, to: baseURL)
            }
            if let idempotency = task.bag.idempotencyHeader {
                if let own = request.value(forHTTPHeaderField: idempotency.name) {
                    task.bag.recordOwnIdempotencyKey(own)
                } else {
                    // Checked before it is set: URLRequest on Linux drops a value with CR or LF
                    // silently, and the request would go without its key.
                    if let refusal = idempotency.refusal { throw .invalidRequest(reason: refusal) }
                    try HTTPFieldValidation.validate(name: idempotency.name, value: idempotency.value)
                    request.setValue(idempotency.value, forHTTPHeaderField: idempotency.name)
                }
            }
            if let added = task.bag.addedHeaders {
                for (name, value) in added {
                    try HTTPFieldValidation.validate(name: name, value: value)
                    request.setValue(value, forHTTPHeaderField: name)
                }
            }
            var sensitiveHeaders = task.bag.sensitiveHeaders
            var hasUncheckedHeaders = false
            if let persistedHeaders {
                persistedHeaders.apply(to: &request)
                sensitiveHeaders.formUnion(persistedHeaders.names)
                hasUncheckedHeaders = true
            }
            defaultHeaders.apply(to: &request)
            // The store's cookies, unless the request carries a Cookie header of its own.
            if let cookies, let url = request.url, request.value(forHTTPHeaderField: "Cookie") == nil,
                let header = cookies.cookieHeader(for: url, at: now())
            {
                request.setValue(header, forHTTPHeaderField: "Cookie")
                hasUncheckedHeaders = true
            }
            return .success(
                Built(request: request, sensitiveHeaders: sensitiveHeaders, hasUncheckedHeaders: hasUncheckedHeaders))
        } catch {
            return .failure(error)
        }
    }

    /// The task's request, a form too large for memory left unwritten (see ``BodyFile/defersForms``).
    private static func makeDeferringForms(_ task: AnyAPITask) throws(APIError) -> URLRequest {
        try BodyFile.defersFormsFlag.withFlagSet { () throws(APIError) in try task.makeURLRequest() }
    }

    /// What fails every request of an engine whose default headers could inject lines into a
    /// request (the first such header, by name); `nil` when they are sound. Worked out once, when
    /// the engine is made.
    static func refusal(of defaultHeaders: APIEngine.DefaultHeaders) -> APIError? {
        for (name, value) in defaultHeaders.fields.sorted(by: { $0.key < $1.key }) {
            do throws(APIError) {
                try HTTPFieldValidation.validate(name: name, value: value)
            } catch {
                return error
            }
        }
        return nil
    }

    /// Checks the request about to be sent: when headers were added since it was built that nobody
    /// checked (persisted ones, a cookie, the credential, an interceptor's), no header may inject
    /// lines into the request; and the timeout must be a positive, finite number of seconds.
    static func check(
        _ request: URLRequest, hasUncheckedHeaders: Bool = true, totalTimeout: TimeInterval? = nil
    ) throws(APIError) {
        if hasUncheckedHeaders { try HTTPFieldValidation.validate(request) }
        let timeout = request.timeoutInterval
        guard timeout.isFinite, timeout > 0 else {
            throw APIError.invalidRequest(reason: "the timeout \(timeout) is not a positive, finite number of seconds")
        }
        if let totalTimeout, !(totalTimeout.isFinite && totalTimeout > 0) {
            throw APIError.invalidRequest(
                reason: "the total timeout \(totalTimeout) is not a positive, finite number of seconds")
        }
    }
}
