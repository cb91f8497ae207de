import Foundation

/// A request whose response body is written to a file instead of memory (see
/// ``APIRequest/download``).
///
/// The body is streamed to a partial file next to the destination (`.<name>.apidownload`), then
/// moved into place in one step when it is complete; the typed response gets the final file's URL
/// (``APIRawResponse/fileURL``) and the headers. The in-memory body limit
/// (``APIRequest/maxResponseBodySize``) does not apply; ``maxSize`` does.
///
/// **Resume.** When the server named a strong validator (a strong `ETag`, else a `Last-Modified`
/// date at least one second before the response's `Date`, RFC 9110 §13.1.5), a download that failed
/// or was cancelled keeps its partial file, and the next attempt (a retry, or a later request for
/// the same destination and URL) asks for the rest with `Range` and `If-Range`. The file at the
/// destination is the server's whole file or nothing (RFC 9110 §14.4, §15.3.7.3):
/// - A `206` is appended only when its `Content-Range` is valid (`bytes first-last/complete` or
///   `/*`, with `first` ≤ `last` < `complete`) and starts at the end of the partial file; any other
///   `206` fails the attempt with ``APIError/invalidRequest(reason:underlying:)`` and drops the part.
/// - A `206` that names another validator than the one sent in `If-Range` (its `ETag`, or its
///   `Last-Modified` when a date was sent), or another complete length than the part was written
///   for, is another version of the file: the part is dropped and the download starts over at once.
/// - A `200` (the file changed, or the server ignores ranges) starts over; a `416` drops the
///   partial file and starts over at once.
/// - A download is complete only when the file has its complete length (a `206`'s complete length,
///   or a `200`'s `Content-Length` when the body is not encoded), which the resume record keeps: a
///   `206` that ends before it (`bytes 100-149/200`) fails the attempt with
///   ``APIError/transport(underlying:)`` (`URLError.networkConnectionLost`, which the default retry
///   policy retries), and keeps the part, so the next attempt asks for the rest.
///
/// Without a validator, or with ``resumes`` `false`, a failed download's partial file is removed.
/// A partial file is never taken for the whole: the move happens only after the transport
/// completed, and only when the file has the complete length.
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

/// What the transport writes a download's body into (``APITransportOptions/responseBody``, an
/// ``APIResponseBodySink``): a transport that supports downloads calls
/// ``begin(statusCode:headers:)`` when the head arrives, then ``write(_:)`` (or the sink's
/// ``write(_:whenReady:)``) for each part of a body it was told to write (a `2xx` one), and keeps
/// any other response's body in memory as usual. It may call these from any thread, one at a time.
/// Its writes go to the disk (``writesBlock``).
///
/// Its transfer machine decides, under its lock, what each call does: a head or a part that
/// comes after the task was cancelled never reaches the file, and the file moves into place only
/// when it is the server's whole file.
public final class APIResponseBodyFile: APIResponseBodySink {

    /// The machine, and the file it acts on.
    struct State {
        var machine: TransferMachine
        var handle: FileHandle?
        /// Parts received and not yet written: parts are written in runs of at least
        /// ``APIResponseBodyFile/writeSize`` bytes (a transport may hand over 16 KiB at a time).
        var pending = Data()
        /// The file system's error behind a ``TransferMachine/Failure/disk`` failure.
        var diskError: (any Error)?
        /// Whether this download still holds its destination (see ``APIResponseBodyFile/claim(_:)``).
        var holdsClaim = true
    }

    /// The bytes gathered before one write to the file: 256 KiB.
    static let writeSize = 256 << 10

    /// The download it is for.
    public let download: APIDownload
    /// The request URL (kept with the validator, so a partial file resumes only the same download).
    let requestURL: URL?
    /// The bytes already on disk that the request asked the rest of (`Range`); 0 for none.
    public let resumeOffset: Int64
    /// What the part on disk was written with, when the request resumes it (`If-Range` carries its
    /// validator).
    let resumed: ResumeRecord?
    private let state: LockedState<State>

    init(download: APIDownload, requestURL: URL?, resumeOffset: Int64, resumed: ResumeRecord? = nil) {
        self.download = download
        self.requestURL = requestURL
        self.resumeOffset = resumeOffset
        self.resumed = resumeOffset > 0 ? resumed : nil
        let terms = TransferMachine.DownloadTerms(
            resumeOffset: resumeOffset, resumed: self.resumed, resumes: download.resumes, maxSize: download.maxSize,
            requestURL: requestURL)
        state = LockedState(State(machine: TransferMachine(sink: .download(terms))))
    }

    deinit {
        state.withLock { state in
            try? state.handle?.close()
            state.handle = nil
        }
        releaseClaim()
    }

    // MARK: One download per destination

    /// The partial files of the downloads in progress: two downloads into one partial file would
    /// interleave their bytes.
    private static let inProgress = LockedState(Set<String>())

    /// Takes the partial file of `download` for one download; `false` when another has it.
    static func claim(_ download: APIDownload) -> Bool {
        inProgress.withLock { $0.insert(download.partialFile.path).inserted }
    }

    /// Lets the destination go, once (a late call must not free a later download's claim).
    private func releaseClaim() {
        let holds = state.withLock { state -> Bool in
            defer { state.holdsClaim = false }
            return state.holdsClaim
        }
        if holds { _ = Self.inProgress.withLock { $0.remove(download.partialFile.path) } }
    }

    // MARK: What the transport calls

    /// The head arrived. Returns whether the body goes to the file (a `2xx`): for a `206` that
    /// continues the part on disk the body is appended, for any other `2xx` the file starts over.
    /// A `206` that does not continue it throws (see ``APIDownload`` for the rules), and so does a
    /// head that comes after the task was cancelled. Any other status: `false`, keep the body in
    /// memory.
    public func begin(statusCode: Int, headers: [String: String]) throws -> Bool {
        try state.withLock { state in
            let actions = state.machine.head(statusCode: statusCode, headers: headers)
            try perform(actions, &state)
            if state.machine.isWriting { return true }
            if let error = Self.error(of: state) { throw error }
            return false
        }
    }

    /// Writes a part of the body. Throws ``APIError/responseTooLarge(limit:)`` past the
    /// download's ``APIDownload/maxSize``, and the file system's error (a full disk) as
    /// ``APIError/transport(underlying:)``. A part that comes after the task was cancelled is
    /// dropped, without an error.
    public func write(_ data: Data) throws {
        // The file is written under the lock, so a part cannot land after the file was closed.
        try state.withLock { state in
            let actions = state.machine.part(count: data.count)
            try perform(actions, &state, data: data)
            if let failure = state.machine.failure { throw Self.error(failure, diskError: state.diskError) }
        }
    }

    /// ``write(_:)``, as a sink: a file never asks the transport to wait.
    public func write(_ data: Data, whenReady: @escaping @Sendable () -> Void) throws -> Bool {
        try write(data)
        return true
    }

    /// `true`: a download's parts are written to the disk.
    public var writesBlock: Bool { true }

    /// The bytes of the file so far (the resumed part included).
    public var writtenBytes: Int64 { state.withLock { $0.machine.body?.written ?? resumeOffset } }

    /// The bytes this response wrote (the resumed part not included).
    public var receivedBytes: Int64 {
        state.withLock { state in state.machine.body.map { $0.written - $0.start } ?? 0 }
    }

    /// Where this response's bytes start in the file: the resume offset when a `206` is appended,
    /// else 0 (also before the head arrived).
    var appendedFrom: Int64 { state.withLock { $0.machine.body?.start ?? 0 } }

    /// Whether the body is going to the file.
    var isWriting: Bool { state.withLock { $0.machine.isWriting } }

    /// The bytes of this response written to the file, or `nil` when its body did not go to the
    /// file (one read of the machine under the lock).
    var writtenBodyBytes: Int64? { state.withLock { state in state.machine.body.map { $0.written - $0.start } } }

    /// The machine as it stands (tests).
    var machine: TransferMachine { state.withLock { $0.machine } }

    // MARK: What the engine calls

    /// Closes the file for a cancellation: what arrived so far is written, later parts are dropped,
    /// and the file is never moved into place (a transport may still answer with success, for a
    /// body it had read before the cancellation reached it).
    func cancel() {
        state.withLock { state in
            let actions = state.machine.cancel()
            try? perform(actions, &state)
        }
        releaseClaim()
    }

    /// How the attempt goes on from the transport's answer (see ``DownloadStage/complete(_:answer:)``).
    enum Finish {
        /// The file is in place: the answer, with its ``APIRawResponse/fileURL``.
        case moved
        /// Send again from byte 0.
        case startOver
        /// The answer goes on as the transport gave it (not a `2xx`).
        case asAnswered
        /// The attempt fails with this error.
        case failed(any Error)
    }

    /// The transport answered: the machine decides what becomes of the file. A `2xx` body the
    /// transport gave in memory (it does not write files, or a stored copy) goes through the
    /// machine as a head and one part first: one route for every body.
    func finish(_ answer: Result<APIRawResponse, any Error>) -> Finish {
        defer { releaseClaim() }
        return state.withLock { state -> Finish in
            if case .success(let raw) = answer, (200..<300).contains(raw.statusCode),
                state.machine.state == .awaitingHead
            {
                let head = state.machine.head(statusCode: raw.statusCode, headers: raw.headers)
                try? perform(head, &state)
                try? perform(state.machine.part(count: raw.body.count), &state, data: raw.body)
            }
            let taken: TransferMachine.Answer
            switch answer {
            case .success(let raw): taken = .success(statusCode: raw.statusCode)
            case .failure: taken = .failure
            }
            guard let (actions, end) = state.machine.answer(taken) else {
                return .failed(APIError.transport(underlying: URLError(.cancelled)))
            }
            do {
                try perform(actions, &state)
            } catch {
                try? perform(state.machine.moveFailed(), &state)
                return .failed(error)
            }
            switch end {
            case .complete: return .moved
            case .asAnswered: return .asAnswered
            case .startOver: return .startOver
            case .cancelled: return .failed(URLError(.cancelled))
            case .transportFailed:
                if case .failure(let error) = answer { return .failed(error) }
                return .failed(URLError(.unknown))
            case .failed(let failure): return .failed(Self.error(failure, diskError: state.diskError))
            case .incomplete(let written, let complete):
                return .failed(
                    APIError.transport(
                        underlying: URLError(
                            .networkConnectionLost,
                            userInfo: [
                                NSLocalizedDescriptionKey:
                                    "the download ended at \(written) of \(complete) bytes; the part is kept to be resumed"
                            ])))
            }
        }
    }

    // MARK: Performing the machine's actions

    /// Performs `actions` on the file, under the lock; a failure is reported to the machine, which
    /// decides what follows. Throws only for a failed move into place.
    private func perform(_ actions: [TransferMachine.Action], _ state: inout State, data: Data? = nil) throws {
        for action in actions {
            switch action {
            case .openFile(let append, let record):
                open(append: append, record: record, &state)
            case .write:
                guard let data else { continue }
                write(data, &state)
            case .drop, .keepPart:
                break
            case .close:
                close(&state)
            case .discard:
                close(&state)
                DownloadStage.discard(download)
            case .moveIntoPlace:
                try DownloadStage.moveIntoPlace(download)
            }
        }
    }

    private func open(append: Bool, record: ResumeRecord, _ state: inout State) {
        let partial = download.partialFile
        // Owner-only, and never through a link planted as the partial file: a part to append to
        // must be a regular file of this user's, else it is refused.
        let handle: FileHandle
        if append {
            guard let existing = OwnerOnlyFile.openToAppend(partial) else {
                _ = state.machine.openFailed(.notOurFile)
                return
            }
            handle = existing
        } else {
            do {
                handle = try OwnerOnlyFile.replace(at: partial)
            } catch {
                state.diskError = error
                _ = state.machine.openFailed(.sinkFailed)
                return
            }
        }
        do {
            try record.save(to: download.resumeRecord)
        } catch {
            try? handle.close()
            state.diskError = error
            _ = state.machine.openFailed(.sinkFailed)
            return
        }
        state.handle = handle
    }

    private func write(_ data: Data, _ state: inout State) {
        guard let handle = state.handle else { return }
        // One buffer for the whole download: no allocation per run.
        if state.pending.isEmpty { state.pending.reserveCapacity(Self.writeSize + data.count) }
        state.pending.append(data)
        guard state.pending.count >= Self.writeSize else { return }
        defer { state.pending.removeAll(keepingCapacity: true) }
        do {
            try handle.write(contentsOf: state.pending)
        } catch {
            state.diskError = error
            try? perform(state.machine.writeFailed(), &state)
        }
    }

    /// Writes what is pending and closes the file.
    private func close(_ state: inout State) {
        guard let handle = state.handle else { return }
        state.handle = nil
        do {
            if !state.pending.isEmpty { try handle.write(contentsOf: state.pending) }
        } catch {
            state.diskError = error
            _ = state.machine.writeFailed()
        }
        try? handle.close()
        state.pending = Data()
    }

    /// The error a transport's call throws for the machine's state: its failure, or the
    /// cancellation for a head that came after it; `nil` to go on.
    private static func error(of state: State) -> APIError? {
        if let failure = state.machine.failure { return error(failure, diskError: state.diskError) }
        if state.machine.isCancelled { return .transport(underlying: URLError(.cancelled)) }
        return nil
    }

    /// The error the attempt fails with for a failure of the machine.
    static func error(_ failure: TransferMachine.Failure, diskError: (any Error)?) -> APIError {
        switch failure {
        case .rangeDoesNotContinue:
            return .invalidRequest(reason: "the server answered 206 with a range that does not continue the download")
        case .anotherVersion:
            return .invalidRequest(reason: "the server answered 206 for another version of the file")
        case .notOurFile:
            return .invalidRequest(reason: "the partial file of the download is not a file of ours")
        case .tooLarge(let limit):
            return .responseTooLarge(limit: Int(clamping: limit))
        case .sinkFailed:
            return .transport(underlying: diskError ?? POSIXError(.EIO))
        case .overlong(let written, let complete):
            return .invalidRequest(reason: "the server sent \(written) bytes of a file it said has \(complete)")
        }
    }

    // MARK: Rules

    /// The first byte of a valid `Content-Range` (see ``ContentRange``); `nil` when it is not one.
    static func contentRangeStart(_ value: String) -> Int64? { ContentRange(value)?.first }

    /// The validator `If-Range` may carry: a strong `ETag`, else a `Last-Modified` date that is
    /// strong by RFC 9110 §13.1.5 (at least one second before the response's `Date`; without a
    /// `Date`, or with a date that does not parse, it is weak); `nil` for none.
    static func validator(etag: String?, lastModified: String?, date: String?) -> String? {
        if let etag = etag?.trimmingCharacters(in: .whitespaces), etag.hasPrefix("\"") { return etag }
        guard let lastModified = lastModified?.trimmingCharacters(in: .whitespaces).nilIfEmpty,
            let date = date?.trimmingCharacters(in: .whitespaces)
        else { return nil }
        let now = Date()
        guard let modified = HTTPDate.parse(lastModified, now: now), let answered = HTTPDate.parse(date, now: now),
            modified.timeIntervalSince1970 <= answered.timeIntervalSince1970 - 1
        else { return nil }
        return lastModified
    }
}

/// A `206`'s `Content-Range` (RFC 9110 §14.4): `bytes first-last/complete` or `bytes first-last/*`.
/// A value that must not be combined with a part is `nil`: another unit, an unsatisfied range
/// (`bytes */1000`), `last` before `first`, `last` not below the complete length, anything but
/// digits where digits go, or a number past `Int64`.
struct ContentRange: Equatable, Sendable {
    var first: Int64
    var last: Int64
    /// `nil` for `*` (the server does not know it).
    var completeLength: Int64?

    init(first: Int64, last: Int64, completeLength: Int64?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    init?(_ value: String) {
        // The field value without its surrounding whitespace (OWS), as bytes.
        var bytes = ArraySlice(value.utf8)
        while let byte = bytes.first, byte == 0x20 || byte == 0x09 { bytes.removeFirst() }
        while let byte = bytes.last, byte == 0x20 || byte == 0x09 { bytes.removeLast() }
        guard let space = bytes.firstIndex(of: 0x20),
            String(decoding: bytes[..<space], as: UTF8.self).lowercased() == "bytes"
        else { return nil }
        let parts = bytes[(space + 1)...].split(separator: 0x2F, maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let positions = parts[0].split(separator: 0x2D, maxSplits: 1, omittingEmptySubsequences: false)
        guard positions.count == 2, let first = Self.number(positions[0]), let last = Self.number(positions[1]),
            first <= last
        else { return nil }
        var complete: Int64?
        if parts[1].elementsEqual([0x2A]) {
            complete = nil
        } else {
            guard let length = Self.number(parts[1]), last < length else { return nil }
            complete = length
        }
        self.init(first: first, last: last, completeLength: complete)
    }

    /// `1*DIGIT` as an `Int64`; `nil` for anything else or past `Int64.max`.
    private static func number(_ digits: ArraySlice<UInt8>) -> Int64? {
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard (0x30...0x39).contains(byte) else { return nil }
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(Int64(byte - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }
}

/// The URL, validator and complete length a partial file was downloaded with, kept beside it.
struct ResumeRecord: Codable, Equatable {
    var url: URL?
    var validator: String?
    /// The server's whole file's length, when it said it; `nil` in a record written before it was kept.
    var completeLength: Int64? = nil

    /// Written owner-only and atomically (a link at `file` is replaced, never written through).
    func save(to file: URL) throws {
        try OwnerOnlyFile.write(try JSONEncoder().encode(self), to: file)
    }

    /// The record at `file`, when it is a regular file of this user's that decodes.
    static func load(from file: URL) -> ResumeRecord? {
        guard let data = OwnerOnlyFile.read(file) else { return nil }
        return try? JSONDecoder().decode(ResumeRecord.self, from: data)
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
