import Foundation

extension APIResponseCache {
    /// How a request uses the engine's ``APIResponseCache``. `.networkOnly` unless the request says
    /// otherwise. Without a cache on the engine every option goes to the network.
    public enum Option: Sendable, Hashable {
        /// Never reads the cache; stores the response unless ``APIRequest/shouldSaveInCache`` is `false`.
        case networkOnly
        /// Delivers the cached response, if there is one, and sends nothing; otherwise goes to the network.
        case cacheOnly
        /// Delivers the cached response first (marked ``APIResponseCache/Source/cache``, through
        /// ``APIManager/task(_:didReceiveCachedResponse:)``), then the network's, which ends the task. A
        /// network failure still ends the task as failed, after the cached copy. The request carries the
        /// cached `ETag` / `Last-Modified` as conditional headers; a `304` ends it with the cached body.
        case both
        /// Uses the cached response while it is younger than `maxAge` seconds; otherwise goes to the
        /// network, revalidating the stale copy with conditional headers (a `304` refreshes the entry and
        /// ends the task with the cached body).
        case fresh(maxAge: TimeInterval)
    }
}

extension APIResponseCache {
    /// Where a delivered response came from.
    public enum Source: String, Sendable, Hashable {
        /// A response received from the network.
        case network
        /// A stored response, delivered without asking the network.
        case cache
        /// A stored response that the server confirmed with `304 Not Modified`.
        case revalidated
    }
}

extension APIResponseCache {
    /// A response together with where it came from, as yielded by ``APIManager/responses(for:)``.
    public struct SourcedResponse<Response: APIResponse>: Sendable {
        /// The response.
        public let response: Response
        /// Where it came from: the cache, the network, or the cache confirmed by a `304`.
        public let source: APIResponseCache.Source
    }
}
