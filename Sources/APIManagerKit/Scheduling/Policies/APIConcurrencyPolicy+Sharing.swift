import Foundation

extension APIConcurrencyPolicy {
    /// Whether identical requests in flight at the same time share one network attempt (see
    /// ``APIRequest/sharing``).
    ///
    /// Two requests are identical when their method, full URL with query, headers (credentials
    /// included, so one user's answer never goes to another) and body are, as they are about to be
    /// sent, and so are their body limit and ``APIRequest/cachePartition``. Each sender keeps its own
    /// ``APITask``, its own delegate events and terminal event, and its own typed response built for its
    /// own request type; only the network attempt is shared, retries included: a request sent while an
    /// identical one waits for its retry delay goes with that retry.
    public enum Sharing: String, Sendable, Hashable, CaseIterable {
        /// Never shared: each task sends its own attempts.
        case never
        /// Shared for the safe methods `GET` and `HEAD`; other methods are sent on their own.
        case safeMethods
        /// Shared whatever the method: opt in only for requests that are safe to merge (an idempotent
        /// `PUT`, a `POST` that only reads).
        case always

        /// Whether a request with `method` may share.
        func allows(_ method: String?) -> Bool {
            switch self {
            case .never: return false
            case .always: return true
            case .safeMethods:
                let method = method?.uppercased() ?? "GET"
                return method == "GET" || method == "HEAD"
            }
        }
    }
}
