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
    /// Whether the task is a download or a streamed response.
    static func isTransfer(_ task: AnyAPITask) -> Bool {
        task.download != nil || task.bodyStream != nil
    }

    /// Gives a stored response to the task's download or stream, as the network's would have been
    /// given: returns the response to build from (for a download: empty body, the file's URL).
    static func deliver(_ stored: APIRawResponse, to task: AnyAPITask, requestURL: URL?) -> Result<
        APIRawResponse, APIError
    > {
        if let download = task.download {
            var request = URLRequest(url: requestURL ?? download.destination)
            switch DownloadStage.prepare(download, request: &request) {
            case .failure(let error):
                return .failure(error)
            case .success(let file):
                switch DownloadStage.complete(file, answer: .success(stored)) {
                case .answer(let result): return result.mapError(APIError.wrapTransport)
                case .startOver: return .failure(.invalidRequest(reason: "the stored download could not be written"))
                }
            }
        }
        if let buffer = task.bodyStream {
            buffer.status.withLock { $0 = stored.statusCode }
            _ = buffer.push(stored.body) {}
            var answered = stored
            answered.body = Data()
            return .success(answered)
        }
        return .success(stored)
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
        if let buffer = task.bodyStream {
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
