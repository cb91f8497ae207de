import Foundation

extension APIResponseCache {
    /// One stored response.
    public struct Entry: Sendable, Hashable, Codable {
        /// The full key it was stored under, compared on every read.
        public let key: APIResponseCache.Key
        /// The stored response, headers and body as received.
        public var response: APIRawResponse
        /// When the response was stored or last revalidated.
        public var storedAt: Date

        /// An entry holding `response` for `key`, stored at `storedAt`.
        public init(key: APIResponseCache.Key, response: APIRawResponse, storedAt: Date) {
            self.key = key
            self.response = response
            self.storedAt = storedAt
        }

        /// The `ETag` to send as `If-None-Match`.
        public var entityTag: String? { response.value(forHeader: "ETag") }
        /// The `Last-Modified` to send as `If-Modified-Since`.
        public var lastModified: String? { response.value(forHeader: "Last-Modified") }

        /// The memory it is charged for: body, headers, URL and key.
        var cost: Int {
            response.body.count + response.headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
                + (response.url?.absoluteString.utf8.count ?? 0) + key.url.utf8.count + key.bodyDigest.utf8.count
                + key.partition.utf8.count + key.method.utf8.count + 64
        }
    }
}

extension APIResponseCache {
    /// What the cache did, for logging. Delivered to ``APIResponseCache/eventHandler`` on the thread
    /// that caused it, without any lock held.
    public enum Event: Sendable, Equatable {
        /// Which tier of the cache.
        public enum Tier: String, Sendable {
            /// The in-memory tier.
            case memory
            /// The on-disk tier.
            case disk
        }

        /// A stored response was found.
        case hit(APIResponseCache.Key, Tier)
        /// Nothing usable was stored for the key.
        case miss(APIResponseCache.Key)
        /// The slot held a different key (a hash collision): a miss.
        case collision(APIResponseCache.Key)
        /// A response was stored.
        case stored(APIResponseCache.Key, bytes: Int)
        /// A response was not stored: `reason` says why (opted out, carries credentials, no cache tier).
        case notStored(APIResponseCache.Key, reason: String)
        /// An entry was evicted to keep the memory tier within its budget (it may remain on disk).
        case evicted(APIResponseCache.Key)
        /// A file was evicted to keep the disk tier within its budget.
        case evictedFile(slot: String)
        /// An entry older than the disk tier's `maxAge` was removed.
        case expired(APIResponseCache.Key)
        /// A file that was truncated, corrupt or not ours was removed.
        case removedDamagedFile(name: String, reason: String)
        /// The disk tier failed and is off; the cache goes on in memory only.
        case diskUnavailable(reason: String)
    }
}
