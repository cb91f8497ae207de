import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache lookup stage of an attempt: what the request's ``APIResponseCache/Option`` makes of the stored
/// entry. It only decides; the attempt acts on its answer (delivering a stored response takes the
/// engine's lock, which this stage never does).
enum CacheLookupStage {
    /// What the lookup found.
    enum Result {
        /// The stored response answers the attempt (a `.cacheOnly` hit, a young `.fresh` entry);
        /// nothing is sent. If it no longer builds a response, the attempt goes to the network with
        /// `context`, the entry removed.
        case answer(APIRawResponse, otherwise: CacheContext)
        /// Deliver the stored copy first (`.both`, first attempt), then go to the network.
        case copyFirst(APIRawResponse, then: CacheContext)
        /// Go to the network; `context` says how to treat the response.
        case network(CacheContext)
    }

    /// - Parameters:
    ///   - sensitiveHeaders: header names the engine marks as credentials for this request.
    ///   - writesBehind: whether the response store may write its file after the task ends.
    static func lookUp(
        _ cache: APIResponseCache, settings: TaskBag.CacheSettings, attempt: Int, request: URLRequest,
        sensitiveHeaders: Set<String>, writesBehind: Bool
    ) -> Result {
        let credentials = CredentialHeaders.credentials(in: request, marked: sensitiveHeaders)
        var partition = settings.partition
        if partition == nil, !credentials.isEmpty, settings.storesAuthenticated {
            // Never one user's response for another: without a partition of the caller's, the
            // credentials themselves make one, as a digest (the secret is never stored).
            partition = credentialPartition(credentials)
        }
        let key = APIResponseCache.Key(request: request, partition: partition)
        let reasonNotToStore: String? =
            if !settings.shouldSave {
                "the request opted out (shouldSaveInCache is false)"
            } else if !credentials.isEmpty && !settings.storesAuthenticated {
                "the request carries credentials (cachesAuthenticatedResponses is false)"
            } else {
                nil
            }
        let plain = CacheContext(
            cache: cache, key: key, revalidating: nil, reasonNotToStore: reasonNotToStore, writesBehind: writesBehind)
        guard settings.option != .networkOnly, let entry = cache.entry(for: key) else { return .network(plain) }
        var revalidating = plain
        revalidating.revalidating = entry
        switch settings.option {
        case .networkOnly:
            return .network(plain)
        case .cacheOnly:
            return .answer(entry.response, otherwise: plain)
        case .fresh(let maxAge):
            if cache.clock.date.timeIntervalSince(entry.storedAt) <= maxAge {
                return .answer(entry.response, otherwise: plain)
            }
            return .network(revalidating)
        case .both:
            return attempt == 1 ? .copyFirst(entry.response, then: revalidating) : .network(revalidating)
        }
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
