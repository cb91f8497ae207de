import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache for downloads and streamed responses, which use it only when their request asks
/// (a ``APIRequest/cacheOption`` other than `.networkOnly`): a stored body is written to the
/// download's destination or handed to the stream in one part; a body the network gave is kept
/// when it is at most ``APIRequestDefaults/maxCachedTransferSize`` (read back from the file, or
/// copied as it streamed), unless it is the `206` of a resumed download.
enum TransferCacheStage {
    /// The response stage of a download or a stream (see ``ResponseStage``): a `304` to a
    /// revalidation is written to the destination or handed to the stream from the refreshed
    /// stored entry; a network response builds the typed one (a download whose response does not
    /// build leaves no file), and its copy is stored when it is small enough.
    static func respond(_ task: AnyAPITask, raw: APIRawResponse, cache: CacheContext?) -> ResponseStage.Outcome {
        if raw.statusCode == 304, let refreshed = cache?.refresh(with: raw) {
            switch deliver(refreshed.response, to: task, requestURL: raw.url) {
            case .answered(let payload): return .built(payload, .revalidated)
            case .failed(let error), .unusable(let error): return .failed(error)
            }
        }
        switch DownloadStage.buildResponse(raw, for: task) {
        case .success(let payload):
            cache?.store(transfer: storedCopy(of: raw, for: task))
            return .built(payload, .network)
        case .failure(let error):
            return .failed(error)
        }
    }

    /// What became of a stored response given to a download or a stream.
    enum Delivery {
        /// Written to the destination, or handed to the stream: the task's response.
        case answered(AnyAPITask.BuiltResponse)
        /// The stored response could not be given (the destination exists and may not be replaced).
        case failed(APIError)
        /// It no longer builds the task's response (the error says why): nothing of it is left (a
        /// destination written from it is removed, a stream was given nothing).
        case unusable(APIError)
    }

    /// Gives a stored response to the task's download or stream, as the network's would have been
    /// given, when it builds the task's response. A stream is given the body only once the response
    /// built (from the head, as the network's is), so a copy that does not build never reaches the
    /// consumer ahead of the network's body; a download's file is written first (its response may
    /// read it), and removed when the response does not build.
    static func deliver(_ stored: APIRawResponse, to task: AnyAPITask, requestURL: URL?) -> Delivery {
        if let download = task.bag.download {
            var request = URLRequest(url: requestURL ?? download.destination)
            switch DownloadStage.prepare(download, request: &request) {
            case .failure(let error):
                return .failed(error)
            case .success(let file):
                switch DownloadStage.complete(file, answer: .success(stored)) {
                case .answer(.success(let written)):
                    switch DownloadStage.buildResponse(written, for: task) {
                    case .success(let response): return .answered(response)
                    case .failure(let error): return .unusable(error)
                    }
                case .answer(.failure(let error)):
                    return .failed(APIError.wrapTransport(error))
                case .startOver:
                    return .failed(.invalidRequest(reason: "the stored download could not be written"))
                }
            }
        }
        guard let buffer = task.bag.bodyStream else { return .unusable(.invalidRequest(reason: "not a transfer")) }
        // A streamed response: built from the head, as the network's is.
        var head = stored
        head.body = Data()
        switch task.buildResponse(head) {
        case .success(let response):
            buffer.status.withLock { $0 = stored.statusCode }
            _ = buffer.push(stored.body) {}
            return .answered(response)
        case .failure(let error):
            return .unusable(error)
        }
    }

    /// The copy of a transfer's response to store: its body read back from the download's file or
    /// taken from the stream's copy; or why it is not stored (larger than the limit, a resumed
    /// download's `206`).
    static func storedCopy(of raw: APIRawResponse, for task: AnyAPITask) -> Result<APIRawResponse, NotStored> {
        let limit = APIRequestDefaults.maxCachedTransferSize
        guard raw.statusCode != 206 else { return .failure(NotStored("a resumed download (206) is not stored")) }
        var copy = raw
        if let file = raw.fileURL {
            guard let size = try? FileSource.size(of: file), size <= Int64(limit) else {
                return .failure(NotStored("the download is larger than \(limit) bytes"))
            }
            guard let body = try? Data(contentsOf: file) else {
                return .failure(NotStored("the downloaded file could not be read back"))
            }
            copy.body = body
            copy.fileURL = nil
            return .success(copy)
        }
        if let buffer = task.bag.bodyStream {
            guard let body = buffer.keptCopy else {
                return .failure(NotStored("the streamed body is larger than \(limit) bytes"))
            }
            copy.body = body
        }
        return .success(copy)
    }

    /// Why a transfer's response is not stored.
    struct NotStored: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
