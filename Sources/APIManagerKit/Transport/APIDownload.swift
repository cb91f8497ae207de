import Foundation

/// A request whose response body is written to a file instead of memory (see
/// ``APIRequest/download``).
///
/// The body is streamed to a partial file next to the destination (`.<name>.apidownload`), then
/// moved into place in one step when it is complete; the typed response gets the final file's URL
/// (``APIRawResponse/fileURL``) and the headers. The in-memory body limit
/// (``APIRequest/maxResponseBodySize``) does not apply; ``maxSize`` does.
///
/// **Resume.** When the server named a strong validator (`ETag`, else `Last-Modified`), a download
/// that failed or was cancelled keeps its partial file, and the next attempt (a retry, or a later
/// request for the same destination and URL) asks for the rest with `Range` and `If-Range`. A `206`
/// from the right offset is appended; a `200` (the file changed, or the server ignores ranges)
/// starts over; a `416` drops the partial file and starts over at once. Without a validator, or with
/// ``resumes`` `false`, a failed download's partial file is removed. A partial file is never taken
/// for the whole: the move happens only after the transport completed.
public struct APIDownload: Sendable, Hashable {
    /// What to do when the destination already exists.
    public enum ExistingFile: Sendable, Hashable {
        /// Replace it (in one step, when the download is complete).
        case replace
        /// Fail with ``APIError/invalidRequest(reason:underlying:)``, before anything is sent.
        case fail
    }

    /// Where the file goes.
    public var destination: URL
    /// What to do when it exists. `.fail` unless given.
    public var ifExists: ExistingFile
    /// The largest body to accept, in bytes; past it the download fails with
    /// ``APIError/responseTooLarge(limit:)``. `nil` (no limit) unless given.
    public var maxSize: Int64?
    /// Whether an interrupted download continues where it stopped. `true` unless given.
    public var resumes: Bool

    /// A download to `destination`; each default is given with its property.
    public init(to destination: URL, ifExists: ExistingFile = .fail, maxSize: Int64? = nil, resumes: Bool = true) {
        self.destination = destination
        self.ifExists = ifExists
        self.maxSize = maxSize
        self.resumes = resumes
    }

    /// The partial file the body is written to until it is complete.
    public var partialFile: URL {
        destination.deletingLastPathComponent().appendingPathComponent(".\(destination.lastPathComponent).apidownload")
    }

    /// What is kept beside the partial file: the URL and validator it was downloaded with.
    var resumeRecord: URL {
        destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).apidownload-resume")
    }
}

/// What the transport writes a download's body into (``APITransportOptions/responseBodyFile``): a
/// transport that supports downloads calls ``begin(statusCode:headers:)`` when the head arrives,
/// then ``write(_:)`` for each part of a body it was told to write (a `2xx` one), and keeps any
/// other response's body in memory as usual. It may call these from any thread, one at a time.
public final class APIResponseBodyFile: Sendable {

    /// The file's state, as the transport left it.
    struct State {
        var handle: FileHandle?
        var written: Int64 = 0
        /// Where writing started: the resume offset when a `206` was appended, else 0.
        var startedAt: Int64 = 0
        var writing = false
        var failure: APIError?
        /// Parts received and not yet written: parts are written in runs of at least
        /// ``APIResponseBodyFile/writeSize`` bytes (a transport may hand over 16 KiB at a time).
        var pending = Data()
        /// Whether this download still holds its destination (see ``APIResponseBodyFile/claim(_:)``).
        var holdsClaim = true
        /// Whether the task was cancelled while the file was open (``cancel()``): what the file holds
        /// may be a part only, whatever the transport answers later.
        var cancelled = false
    }

    /// The bytes gathered before one write to the file: 256 KiB.
    static let writeSize = 256 << 10

    /// The download it is for.
    public let download: APIDownload
    /// The request URL (kept with the validator, so a partial file resumes only the same download).
    let requestURL: URL?
    /// The bytes already on disk that the request asked the rest of (`Range`); 0 for none.
    public let resumeOffset: Int64
    private let state = LockedState(State())

    init(download: APIDownload, requestURL: URL?, resumeOffset: Int64) {
        self.download = download
        self.requestURL = requestURL
        self.resumeOffset = resumeOffset
    }

    deinit { releaseClaim() }

    // MARK: One download per destination

    /// The partial files of the downloads in progress: two downloads into one partial file would
    /// interleave their bytes.
    private static let inProgress = LockedState(Set<String>())

    /// Takes the partial file of `download` for one download; `false` when another has it.
    static func claim(_ download: APIDownload) -> Bool {
        inProgress.withLock { $0.insert(download.partialFile.path).inserted }
    }

    /// Lets the destination go, once (a late `close()` must not free a later download's claim).
    private func releaseClaim() {
        let holds = state.withLock { state -> Bool in
            defer { state.holdsClaim = false }
            return state.holdsClaim
        }
        if holds { _ = Self.inProgress.withLock { $0.remove(download.partialFile.path) } }
    }

    /// The head arrived. Returns whether the body goes to the file (a `2xx`): for a `206` from
    /// the resume offset the body is appended, for any other `2xx` the file starts over. A `206`
    /// from another offset throws. Any other status: `false`, keep the body in memory.
    public func begin(statusCode: Int, headers: [String: String]) throws -> Bool {
        guard (200..<300).contains(statusCode) else { return false }
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        var append = false
        if statusCode == 206 {
            guard resumeOffset > 0, let range = header("Content-Range"),
                Self.contentRangeStart(range) == resumeOffset
            else {
                throw fail(
                    .invalidRequest(reason: "the server answered 206 with a range that does not continue the download"))
            }
            append = true
        }
        let partial = download.partialFile
        do {
            if !append {
                try? FileManager.default.removeItem(at: partial)
                guard FileManager.default.createFile(atPath: partial.path, contents: nil) else {
                    throw CocoaError(.fileWriteUnknown)
                }
            }
            let handle = try FileHandle(forWritingTo: partial)
            if append { try handle.seekToEnd() }
            try ResumeRecord(
                url: requestURL, validator: Self.validator(etag: header("ETag"), lastModified: header("Last-Modified"))
            )
            .save(to: download.resumeRecord)
            state.withLock { state in
                state.handle = handle
                state.writing = true
                state.startedAt = append ? resumeOffset : 0
                state.written = state.startedAt
            }
        } catch {
            throw fail(.transport(underlying: error))
        }
        return true
    }

    /// Writes a part of the body. Throws ``APIError/responseTooLarge(limit:)`` past the
    /// download's ``APIDownload/maxSize``, and the file system's error (a full disk) as
    /// ``APIError/transport(underlying:)``.
    public func write(_ data: Data) throws {
        // The file is written under the lock, so a run cannot land after the one `close()` flushes.
        try state.withLock { state in
            guard let handle = state.handle else { return }
            let total = state.written + Int64(data.count)
            if let limit = download.maxSize, total > limit {
                state.failure = .responseTooLarge(limit: Int(clamping: limit))
                throw APIError.responseTooLarge(limit: Int(clamping: limit))
            }
            state.written = total
            // One buffer for the whole download: no allocation per run.
            if state.pending.isEmpty { state.pending.reserveCapacity(Self.writeSize + data.count) }
            state.pending.append(data)
            guard state.pending.count >= Self.writeSize else { return }
            defer { state.pending.removeAll(keepingCapacity: true) }
            do {
                try handle.write(contentsOf: state.pending)
            } catch {
                state.failure = .transport(underlying: error)
                throw APIError.transport(underlying: error)
            }
        }
    }

    /// The bytes of the file so far (the resumed part included).
    public var writtenBytes: Int64 { state.withLock { $0.written } }

    /// Where this response's bytes start in the file: the resume offset when a `206` is appended,
    /// else 0 (also before the head arrived).
    var appendedFrom: Int64 { state.withLock { $0.startedAt } }

    /// Whether the body went to the file.
    var isWriting: Bool { state.withLock { $0.writing } }

    /// The bytes this response wrote (the resumed part not included).
    public var receivedBytes: Int64 { state.withLock { $0.written - $0.startedAt } }

    /// A failure of writing, kept so the engine reports it (and removes the partial file).
    private func fail(_ error: APIError) -> APIError {
        state.withLock { $0.failure = error }
        return error
    }

    var failure: APIError? { state.withLock { $0.failure } }

    /// Closes the file for a cancellation: what arrived so far is written, later parts are dropped,
    /// and the file is never moved into place (a transport may still answer with success, for a
    /// body it had read before the cancellation reached it).
    func cancel() {
        state.withLock { $0.cancelled = true }
        close()
    }

    /// Whether the download was cancelled (see ``cancel()``).
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Writes what is pending and closes the file; another download may then take its place.
    func close() {
        defer { releaseClaim() }
        state.withLock { state in
            guard let handle = state.handle else { return }
            do {
                if !state.pending.isEmpty { try handle.write(contentsOf: state.pending) }
            } catch {
                state.failure = .transport(underlying: error)
            }
            try? handle.close()
            state.handle = nil
            state.pending = Data()
        }
    }

    // MARK: Rules

    /// The first byte of a `Content-Range: bytes first-last/total`; `nil` when it is not one.
    static func contentRangeStart(_ value: String) -> Int64? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let range = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard let dash = range.firstIndex(of: "-") else { return nil }
        return Int64(range[..<dash])
    }

    /// The validator `If-Range` may carry: a strong `ETag`, else `Last-Modified`; `nil` for none.
    static func validator(etag: String?, lastModified: String?) -> String? {
        if let etag = etag?.trimmingCharacters(in: .whitespaces), etag.hasPrefix("\"") { return etag }
        return lastModified?.trimmingCharacters(in: .whitespaces).nilIfEmpty
    }
}

/// The URL and validator a partial file was downloaded with, kept beside it.
struct ResumeRecord: Codable, Equatable {
    var url: URL?
    var validator: String?

    func save(to file: URL) throws {
        try JSONEncoder().encode(self).write(to: file, options: .atomic)
    }

    static func load(from file: URL) -> ResumeRecord? {
        guard let data = try? Data(contentsOf: file) else { return nil }
        return try? JSONDecoder().decode(ResumeRecord.self, from: data)
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
