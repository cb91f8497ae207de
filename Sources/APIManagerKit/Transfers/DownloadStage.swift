import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The download rules (``APIDownload``): what an attempt asks for before it is sent (the rest of a
/// partial file), and what becomes of the file when the transport answered.
enum DownloadStage {
    /// Checks the destination (and that no other download is writing to it), and asks for the rest
    /// of a partial file that can be resumed (its URL and validator match); a partial file that
    /// cannot is removed. Returns what the transport writes into, which holds the destination until
    /// it is closed.
    static func prepare(_ download: APIDownload, request: inout URLRequest) -> Result<APIResponseBodyFile, APIError> {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        let directory = download.destination.deletingLastPathComponent()
        guard manager.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            return .failure(.invalidRequest(reason: "the download's directory \(directory.path) does not exist"))
        }
        if download.ifExists == .fail, manager.fileExists(atPath: download.destination.path) {
            return .failure(
                .invalidRequest(reason: "the download's destination \(download.destination.lastPathComponent) exists"))
        }
        guard APIResponseBodyFile.claim(download) else {
            return .failure(
                .invalidRequest(
                    reason: "another download to \(download.destination.lastPathComponent) is in progress"))
        }
        // Ranges count the bytes as sent: a body the transport decompressed could not be resumed.
        if request.value(forHTTPHeaderField: "Accept-Encoding") == nil {
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        var offset: Int64 = 0
        var resumed: ResumeRecord?
        // Only a regular file of this user's is resumed: a link planted as the partial file (with a
        // forged record) is removed, never appended through.
        if download.resumes, OwnerOnlyFile.isRegularFileOfOurs(download.partialFile),
            let size = try? FileSource.size(of: download.partialFile), size > 0,
            let record = ResumeRecord.load(from: download.resumeRecord), record.url == request.url,
            let validator = record.validator, record.completeLength.map({ size < $0 }) ?? true
        {
            offset = size
            resumed = record
            request.setValue("bytes=\(size)-", forHTTPHeaderField: "Range")
            request.setValue(validator, forHTTPHeaderField: "If-Range")
        } else {
            discard(download)
        }
        return .success(
            APIResponseBodyFile(download: download, requestURL: request.url, resumeOffset: offset, resumed: resumed))
    }

    enum Completion {
        /// Go on with this answer (a response whose body is in the file, or as it came).
        case answer(Result<APIRawResponse, any Error>)
        /// The server refused the range (`416`): the partial file is gone; send again from the start.
        case startOver
    }

    /// The transport answered: the attempt's ``TransferMachine`` decides (see
    /// ``APIResponseBodyFile/finish(_:)``). A complete `2xx` body moves into place; a failure keeps
    /// a partial file that can be resumed and removes any other. A cancelled download is a failure
    /// whatever the answer: its file was closed part-way (a transport may answer with success for a
    /// body it read before the cancellation reached it, as URLSession on Linux does when its
    /// delegate queue is behind), and moving it into place would leave a cut file at the destination.
    static func complete(_ file: APIResponseBodyFile, answer: Result<APIRawResponse, any Error>) -> Completion {
        switch file.finish(answer) {
        case .moved:
            guard case .success(var raw) = answer else { return .answer(answer) }
            raw.body = Data()
            raw.fileURL = file.download.destination
            return .answer(.success(raw))
        case .asAnswered: return .answer(answer)
        case .startOver: return .startOver
        case .failed(let error): return .answer(.failure(error))
        }
    }

    /// Builds the task's response from `raw`; when `raw` is a download moved to its destination and
    /// the response does not build, the file is removed: a failed task leaves no file there.
    static func buildResponse(_ raw: APIRawResponse, for task: AnyAPITask) -> Result<
        AnyAPITask.BuiltResponse, APIError
    > {
        let built = task.buildResponse(raw)
        if case .failure = built, let download = task.bag.download, let file = raw.fileURL, file == download.destination
        {
            try? FileManager.default.removeItem(at: file)
        }
        return built
    }

    /// Moves the complete partial file to the destination in one step (`rename`), replacing it or
    /// not as the download says; its record goes with it. Throws when it cannot.
    static func moveIntoPlace(_ download: APIDownload) throws {
        if download.ifExists == .fail, FileManager.default.fileExists(atPath: download.destination.path) {
            throw APIError.invalidRequest(
                reason: "the download's destination \(download.destination.lastPathComponent) exists")
        }
        guard rename(download.partialFile.path, download.destination.path) == 0 else {
            throw APIError.transport(underlying: POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO))
        }
        try? FileManager.default.removeItem(at: download.resumeRecord)
    }

    /// Removes the partial file and its record.
    static func discard(_ download: APIDownload) {
        try? FileManager.default.removeItem(at: download.partialFile)
        try? FileManager.default.removeItem(at: download.resumeRecord)
    }
}
