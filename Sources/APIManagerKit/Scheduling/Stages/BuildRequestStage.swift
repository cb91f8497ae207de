import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The first stage of an attempt: the `URLRequest`, built by the manager's `urlRequest(for:)`
/// (which encodes the body), with the persisted auth headers added, then checked: no header may
/// inject lines, and the timeout must be a positive, finite number of seconds.
enum BuildRequestStage {
    /// The request to send, and the header names that carry its credentials.
    struct Built {
        var request: URLRequest
        var sensitiveHeaders: Set<String>
    }

    static func run(_ task: AnyAPITask, persistedHeaders: APIPersistedHeaders?) -> Result<Built, APIError> {
        do throws(APIError) {
            var request = try task.makeURLRequest()
            var sensitiveHeaders = task.sensitiveHeaders
            if let persistedHeaders {
                persistedHeaders.apply(to: &request)
                sensitiveHeaders.formUnion(persistedHeaders.names)
            }
            // Whatever set them (the request, `configure(_:)`, `urlRequest(for:)`), no header may
            // inject lines into the request.
            try HTTPFieldValidation.validate(request)
            let timeout = request.timeoutInterval
            guard timeout.isFinite, timeout > 0 else {
                throw APIError.invalidRequest(
                    reason: "the timeout \(timeout) is not a positive, finite number of seconds")
            }
            return .success(Built(request: request, sensitiveHeaders: sensitiveHeaders))
        } catch {
            return .failure(error)
        }
    }
}
