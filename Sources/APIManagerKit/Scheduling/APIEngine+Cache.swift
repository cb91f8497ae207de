import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// What an attempt needs to know about the cache when its response arrives.
    struct CacheContext: Sendable {
        let cache: APIResponseCache
        let key: APICacheKey
        /// The stored entry whose validators the request carries; a `304` refreshes and delivers it.
        let revalidating: APICacheEntry?
        /// Why the response will not be stored, or `nil` when it will.
        let reasonNotToStore: String?

        func store(_ response: APIRawResponse) {
            if let reasonNotToStore {
                cache.note(.notStored(key, reason: reasonNotToStore))
            } else if let control = response.value(forHeader: "Cache-Control"),
                control.lowercased().contains("no-store")
            {
                cache.note(.notStored(key, reason: "the response says Cache-Control: no-store"))
            } else {
                cache.store(response, for: key)
            }
        }
    }

    /// Applies the task's cache option before an attempt: answers from the cache (returning `nil`),
    /// delivers a cached copy ahead of the network, adds conditional headers, and says how to treat
    /// the response.
    func consultCache(
        _ cache: APIResponseCache, for task: AnyAPITask, attempt: Int, request: inout URLRequest,
        sensitiveHeaders: Set<String>
    ) -> CacheContext? {
        let settings = task.cacheSettings
        let credentials = CredentialHeaders.credentials(in: request, marked: sensitiveHeaders)
        var partition = settings.partition
        if partition == nil, !credentials.isEmpty, settings.storesAuthenticated {
            // Never one user's response for another: without a partition of the caller's, the
            // credentials themselves make one, as a digest (the secret is never stored).
            partition = Self.credentialPartition(credentials)
        }
        let key = APICacheKey(request: request, partition: partition)
        let reasonNotToStore: String? =
            if !settings.shouldSave {
                "the request opted out (shouldSaveInCache is false)"
            } else if !credentials.isEmpty && !settings.storesAuthenticated {
                "the request carries credentials (cachesAuthenticatedResponses is false)"
            } else {
                nil
            }

        var revalidating: APICacheEntry?
        if settings.option != .networkOnly, let entry = cache.entry(for: key) {
            switch settings.option {
            case .networkOnly:
                break
            case .cacheOnly:
                if deliverCached(entry.response, for: task, attempt: attempt, terminal: true) { return nil }
                cache.remove(for: key)
            case .fresh(let maxAge):
                if cache.clock.date.timeIntervalSince(entry.storedAt) <= maxAge,
                    deliverCached(entry.response, for: task, attempt: attempt, terminal: true)
                {
                    return nil
                }
                revalidating = entry
            case .both:
                if attempt == 1, !deliverCached(entry.response, for: task, attempt: attempt, terminal: false) {
                    cache.remove(for: key)
                } else {
                    revalidating = entry
                }
            }
        }
        if let revalidating {
            if let tag = revalidating.entityTag, request.value(forHTTPHeaderField: "If-None-Match") == nil {
                request.setValue(tag, forHTTPHeaderField: "If-None-Match")
            }
            if let date = revalidating.lastModified, request.value(forHTTPHeaderField: "If-Modified-Since") == nil {
                request.setValue(date, forHTTPHeaderField: "If-Modified-Since")
            }
        }
        return CacheContext(cache: cache, key: key, revalidating: revalidating, reasonNotToStore: reasonNotToStore)
    }

    /// `credential:` and the SHA-256 of the credential headers' names and values.
    static func credentialPartition(_ credentials: [(name: String, value: String)]) -> String {
        var hasher = SHA256()
        for (name, value) in credentials {
            hasher.update(name.utf8)
            hasher.update([0])
            hasher.update(value.utf8)
            hasher.update([0])
        }
        return "credential:" + SHA256.hex(hasher.finalize())
    }
}
