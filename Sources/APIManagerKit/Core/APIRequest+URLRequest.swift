import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIRequest {
    /// The URL this request is sent to: ``url`` with ``path`` appended (one slash between them,
    /// `{name}` templates filled) and the query parameters added to any query ``url`` has.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when a template value is missing or
    ///   the result is not a valid URL.
    public func resolvedURL() throws(APIError) -> URL {
        var parameters = try ResolvedParameters(self.parameters)
        return try resolvedURL(placing: &parameters)
    }

    /// The `URLRequest` the default ``APIManager/urlRequest(for:)`` sends: resolved URL, method,
    /// headers, timeout, body with its `Content-Type` (unless a header names one), authorization,
    /// then ``configure(_:)``.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` for a header whose name is not an
    ///   RFC 9110 token or whose value contains CR, LF or NUL, a non-finite number in the query or a
    ///   form body, a `.` or `..` path value, and whatever else makes the request unbuildable.
    public func makeURLRequest() throws(APIError) -> URLRequest {
        var parameters = try ResolvedParameters(self.parameters)
        var request = URLRequest(
            url: try resolvedURL(placing: &parameters), timeoutInterval: APIRequestDefaults.clampedTimeout(timeout))
        // A new URLRequest is a GET already; on Linux the setter costs a few thousand instructions.
        if method != .get { request.httpMethod = method.rawValue }
        // Checked before setting: on Linux a value with CR or LF would be dropped without a word.
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            try HTTPFieldValidation.validate(name: name, value: value)
            request.setValue(value, forHTTPHeaderField: name)
        }
        if let requestBody = try body(from: parameters) {
            if let contentType = try requestBody.apply(to: &request),
                request.value(forHTTPHeaderField: "Content-Type") == nil
            {
                request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            }
        }
        if let authorization {
            let header = authorization.header
            try HTTPFieldValidation.validate(name: header.name, value: header.value)
            request.setValue(header.value, forHTTPHeaderField: header.name)
        }
        do {
            try configure(&request)
        } catch let error as APIError {
            throw error
        } catch {
            throw .invalidRequest(reason: "configure(_:) rejected the URL request", underlying: error)
        }
        return request
    }

    /// Fills the path templates and writes the query, moving parameters placed by method into the
    /// query (GET, HEAD, DELETE) or the body (other methods).
    private func resolvedURL(placing parameters: inout ResolvedParameters) throws(APIError) -> URL {
        let filledPath = try PathTemplate.fill(path, with: &parameters)
        if !parameters.byMethod.isEmpty {
            if method.putsParametersInQuery {
                parameters.query.merge(parameters.byMethod, uniquingKeysWith: { _, explicit in explicit })
            } else {
                try parameters.addBody(.object(parameters.byMethod), encoding: nil)
            }
            parameters.byMethod = [:]
        }
        guard !filledPath.isEmpty || !parameters.query.isEmpty else { return url }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            throw .invalidRequest(reason: "the base URL \(APISecrets.redacted(url)) cannot be parsed")
        }
        if !filledPath.isEmpty {
            let base = components.percentEncodedPath
            let suffix = filledPath.hasPrefix("/") ? String(filledPath.dropFirst()) : filledPath
            components.percentEncodedPath = (base.hasSuffix("/") ? base : base + "/") + suffix
        }
        if !parameters.query.isEmpty {
            let encoded = try queryEncoding.encode(parameters.query)
            if !encoded.isEmpty {
                let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
                components.percentEncodedQuery = existing + encoded
            }
        }
        guard let joined = components.url else {
            throw .invalidRequest(
                reason: "the path \"\(path)\" does not form a valid URL with \(APISecrets.redacted(url))")
        }
        return joined
    }

    private func body(from parameters: ResolvedParameters) throws(APIError) -> APIRequestBody? {
        let fromParameters: APIRequestBody?
        switch parameters.body {
        case nil: fromParameters = nil
        case .data(let data): fromParameters = data
        case .value(.object(let members), _) where members.values.contains(where: \.containsFile):
            // A file makes the body multipart, whatever the encoding.
            fromParameters = .multipart(
                try APIMultipartFormData(parameters: members, encoding: queryEncoding),
                inMemoryLimit: multipartInMemoryLimit)
        case .value(let value, let encoding): fromParameters = try (encoding ?? bodyEncoding).body(for: value)
        }
        switch (body, fromParameters) {
        case (let raw?, nil): return raw
        case (nil, let encoded): return encoded
        case (.some, .some):
            throw .invalidRequest(reason: "the request has both a raw body and body parameters; give one of them")
        }
    }
}
