import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an attempt needs to know about the cache when its response arrives.
struct CacheContext: Sendable {
    let cache: APIResponseCache
    let key: APIResponseCache.Key
    /// The stored entry whose validators the request carries; a `304` refreshes and delivers it.
    var revalidating: APIResponseCache.Entry?
    /// Why the response will not be stored, or `nil` when it will.
    let reasonNotToStore: String?
    /// Whether the store may write its file after the task ends (the engine works on a queue).
    let writesBehind: Bool

    /// Adds the stored entry's validators (`If-None-Match`, `If-Modified-Since`) unless the request
    /// sets them itself.
    func addConditionalHeaders(to request: inout URLRequest) {
        guard let revalidating else { return }
        if let tag = revalidating.entityTag, request.value(forHTTPHeaderField: "If-None-Match") == nil {
            request.setValue(tag, forHTTPHeaderField: "If-None-Match")
        }
        if let date = revalidating.lastModified, request.value(forHTTPHeaderField: "If-Modified-Since") == nil {
            request.setValue(date, forHTTPHeaderField: "If-Modified-Since")
        }
    }

    /// The cache store stage (after the response stage, before the terminal event): keeps a
    /// response that built a typed response, unless the request or the response says not to. On a
    /// work queue the file is written behind the task.
    func store(_ response: APIRawResponse) {
        if let reasonNotToStore {
            cache.note(.notStored(key, reason: reasonNotToStore))
        } else if let control = response.value(forHeader: "Cache-Control"), control.lowercased().contains("no-store") {
            cache.note(.notStored(key, reason: "the response says Cache-Control: no-store"))
        } else {
            cache.store(
                APIResponseCache.Entry(key: key, response: response, storedAt: cache.clock.date),
                writingBehind: writesBehind)
        }
    }

    /// Keeps a download's or a streamed response's copy (see ``TransferCacheStage``), or notes why not.
    func store(transfer copy: Result<APIRawResponse, TransferCacheStage.NotStored>) {
        switch copy {
        case .success(let copy): store(copy)
        case .failure(let notStored): cache.note(.notStored(key, reason: notStored.reason))
        }
    }

    /// A `304 Not Modified` for the entry being revalidated: re-dates and re-stores it, and returns it.
    func refresh(with notModified: APIRawResponse) -> APIResponseCache.Entry? {
        guard let revalidating else { return nil }
        return cache.refresh(revalidating, with: notModified, writingBehind: writesBehind)
    }
}
