import Foundation

/// One attempt's response body on its way to a download's file or a stream, as a value whose events
/// change it and return the actions to perform (``Action``). It owns the races a cancellation runs
/// against late callbacks (a head, a part or a successful answer the transport gives after the task
/// was cancelled) and the rules of what becomes of a download's file: the file at the destination
/// is the server's whole file or nothing, and a kept part is a prefix of the server's file.
///
/// ``APIResponseBodyFile`` drives it under its lock and performs the file actions; tests drive it
/// alone. It never touches a file, a stream or a clock.
struct TransferMachine: Equatable, Sendable {
    /// Where the body goes.
    enum Sink: Equatable, Sendable {
        /// A download's partial file (see ``APIDownload``).
        case download(DownloadTerms)
        /// A stream's buffer: its consumer reads it as it arrives. An event stream's body goes to
        /// it only when it is one (a `200 text/event-stream`, HTML §9.2.3); any other is kept in
        /// memory for the engine to refuse.
        case stream(eventStream: Bool)
    }

    /// What a download attempt knows before its head arrives.
    struct DownloadTerms: Equatable, Sendable {
        /// The bytes already on disk that the request asked the rest of (`Range`); 0 for none.
        var resumeOffset: Int64 = 0
        /// What that part was written with (its `If-Range` validator and complete length); `nil`
        /// when the request resumes nothing.
        var resumed: ResumeRecord?
        /// Whether an interrupted download keeps its part to be resumed (``APIDownload/resumes``).
        var resumes = true
        /// The largest file to accept (``APIDownload/maxSize``); `nil` for no limit.
        var maxSize: Int64?
        /// The request URL, kept in the resume record.
        var requestURL: URL?
    }

    /// The body the sink holds.
    struct Body: Equatable, Sendable {
        /// Where this response's bytes start in the file: the resume offset for a `206` that is
        /// appended, else 0.
        var start: Int64
        /// The bytes the sink holds, a resumed part included (for a stream: the bytes pushed).
        var written: Int64
        /// The server's whole file's length, when the head said it: a download is complete only then.
        var completeLength: Int64?
        /// The validator the file is written with (kept in its resume record): a part is kept to be
        /// resumed only with one.
        var validator: String?
    }

    /// Why a body cannot be the server's file.
    enum Failure: Equatable, Sendable {
        /// A `206` whose `Content-Range` is not valid or does not start at the part on disk.
        case rangeDoesNotContinue
        /// A `206` of another version of the file than the part on disk: the download starts over.
        case anotherVersion
        /// The partial file to append to is not a regular file of this user's.
        case notOurFile
        /// Past ``APIDownload/maxSize``.
        case tooLarge(limit: Int64)
        /// Writing to the sink failed (a full disk, a read-only folder, a stream's overflow past its
        /// limit); its error is the driver's.
        case sinkFailed
        /// The server sent more bytes than the complete length it named.
        case overlong(written: Int64, completeLength: Int64)
    }

    enum State: Equatable, Sendable {
        /// Sent; no head yet.
        case awaitingHead
        /// The response is not a `2xx`: its body is the transport's to keep in memory.
        case inMemory
        /// The body goes to the sink.
        case writing(Body)
        /// The task was cancelled (with the body as it was, `nil` when none had started): later
        /// heads and parts are dropped, and the answer, whatever it is, ends the attempt as cancelled.
        case cancelled(Body?)
        /// The body cannot be the server's file: later parts are dropped and the answer fails with
        /// the failure (or starts over, for another version).
        case failed(Failure, Body?)
        /// The answer was taken (with the body as it was, `nil` when none had started).
        case ended(End, Body?)
    }

    /// What to do, in order, once the event was taken.
    enum Action: Equatable, Sendable {
        /// Open the partial file, to append at the resume offset or replaced from byte 0, and write
        /// its resume record. Report a failure with ``openFailed(_:)``.
        case openFile(append: Bool, record: ResumeRecord)
        /// Write the part to the sink. Report a failure with ``writeFailed()``.
        case write
        /// Drop the part: nothing is written after a cancellation, a failure or the answer.
        case drop
        /// Write what is buffered and close the file.
        case close
        /// Leave the partial file and its record, to be resumed.
        case keepPart
        /// Remove the partial file and its record.
        case discard
        /// Move the complete partial file to the destination in one step. Report a failure with
        /// ``moveFailed()``.
        case moveIntoPlace
    }

    /// How the attempt goes on from the transport's answer.
    enum End: Equatable, Sendable {
        /// The sink holds the whole body (a download's file is in place).
        case complete
        /// The answer goes on as the transport gave it: a response that is not a `2xx`, whose body
        /// is in memory.
        case asAnswered
        /// Send again from byte 0: a `416` to a range, or a `206` of another version.
        case startOver
        /// The task was cancelled: the attempt fails as cancelled, whatever the transport answered.
        case cancelled
        /// The transport failed: the attempt fails with its error.
        case transportFailed
        /// The attempt fails with the machine's failure.
        case failed(Failure)
        /// The body ended before the complete length: the attempt fails as a dropped connection
        /// does (a retry asks for the rest of a kept part).
        case incomplete(written: Int64, completeLength: Int64)
    }

    /// What the transport answered, as far as the body goes.
    enum Answer: Equatable, Sendable {
        case success(statusCode: Int)
        case failure
    }

    let sink: Sink
    private(set) var state: State = .awaitingHead

    init(sink: Sink) {
        self.sink = sink
    }

    // MARK: Reading

    /// The body as it stands, in any state; `nil` before it started.
    var body: Body? {
        switch state {
        case .writing(let body): return body
        case .cancelled(let body), .failed(_, let body), .ended(_, let body): return body
        case .awaitingHead, .inMemory: return nil
        }
    }

    var isWriting: Bool {
        if case .writing = state { return true }
        return false
    }

    var isCancelled: Bool {
        switch state {
        case .cancelled, .ended(.cancelled, _): return true
        default: return false
        }
    }

    var failure: Failure? {
        switch state {
        case .failed(let failure, _), .ended(.failed(let failure), _): return failure
        default: return nil
        }
    }

    private var terms: DownloadTerms? {
        if case .download(let terms) = sink { return terms }
        return nil
    }

    // MARK: Events

    /// The head arrived. A `2xx` body goes to the sink (``isWriting``); a download's `206` is
    /// appended only when it continues the part on disk, of the same version (``APIDownload``).
    /// A head after a cancellation or a failure is dropped: it never opens, nor empties, the file.
    mutating func head(statusCode: Int, headers: [String: String]) -> [Action] {
        guard case .awaitingHead = state else { return [.drop] }
        guard (200..<300).contains(statusCode) else {
            state = .inMemory
            return []
        }
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
        guard let terms else {
            if case .stream(eventStream: true) = sink,
                !APIServerSentEvent.Stream.isEventStream(statusCode: statusCode, contentType: header("Content-Type"))
            {
                state = .inMemory
            } else {
                state = .writing(Body(start: 0, written: 0))
            }
            return []
        }
        let validator = APIResponseBodyFile.validator(
            etag: header("ETag"), lastModified: header("Last-Modified"), date: header("Date"))
        if statusCode == 206 {
            guard terms.resumeOffset > 0, let resumed = terms.resumed, let field = header("Content-Range"),
                let range = ContentRange(field), range.first == terms.resumeOffset
            else {
                state = .failed(.rangeDoesNotContinue, nil)
                return []
            }
            if Self.isAnotherVersion(sent: resumed, answered: headers, range: range) {
                state = .failed(.anotherVersion, nil)
                return []
            }
            // A 206 that names no validator matched the one `If-Range` sent: the part keeps it.
            let body = Body(
                start: terms.resumeOffset, written: terms.resumeOffset,
                completeLength: range.completeLength ?? resumed.completeLength,
                validator: validator ?? resumed.validator)
            state = .writing(body)
            return [.openFile(append: true, record: record(of: body))]
        }
        var completeLength: Int64?
        if header("Content-Encoding").map({ APIHTTPRules.contentCodings($0).isEmpty }) ?? true,
            let length = header("Content-Length").flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }),
            length >= 0
        {
            completeLength = length
        }
        let body = Body(start: 0, written: 0, completeLength: completeLength, validator: validator)
        state = .writing(body)
        return [.openFile(append: false, record: record(of: body))]
    }

    /// The partial file could not be opened (or its record written).
    mutating func openFailed(_ failure: Failure) -> [Action] {
        guard case .writing = state else { return [] }
        state = .failed(failure, nil)
        return []
    }

    /// A part of `count` bytes arrived. Past ``DownloadTerms/maxSize`` the attempt fails and the
    /// file is closed.
    mutating func part(count: Int) -> [Action] {
        guard case .writing(var body) = state else { return [.drop] }
        let total = body.written + Int64(count)
        if let limit = terms?.maxSize, total > limit {
            state = .failed(.tooLarge(limit: limit), body)
            return [.drop, .close]
        }
        body.written = total
        state = .writing(body)
        return [.write]
    }

    /// Writing a part failed.
    mutating func writeFailed() -> [Action] {
        guard case .writing(let body) = state else { return [] }
        state = .failed(.sinkFailed, body)
        return [.close]
    }

    /// The task was cancelled: the file is closed with what arrived, and nothing later is written.
    mutating func cancel() -> [Action] {
        switch state {
        case .awaitingHead, .inMemory:
            state = .cancelled(nil)
            return []
        case .writing(let body):
            state = .cancelled(body)
            return terms == nil ? [] : [.close]
        case .cancelled, .failed, .ended:
            return []
        }
    }

    /// The transport answered. Returns the actions and how the attempt goes on; `nil` for a second
    /// answer, which changes nothing.
    mutating func answer(_ answer: Answer) -> (actions: [Action], end: End)? {
        let outcome: (actions: [Action], end: End)
        switch state {
        case .ended:
            return nil
        case .cancelled(let body):
            outcome = (keepOrDiscard(body), .cancelled)
        case .failed(.anotherVersion, _):
            outcome = (discard, .startOver)
        case .failed(let failure, _):
            outcome = (discard, .failed(failure))
        case .awaitingHead, .inMemory:
            if case .success(416) = answer, let terms, terms.resumeOffset > 0 {
                outcome = (discard, .startOver)
            } else if case .failure = answer {
                outcome = (keepOrDiscard(nil), .transportFailed)
            } else {
                // A response that is not a 2xx (a driver gives a 2xx body in memory as head and
                // part first): the part on disk is left as it is.
                outcome = ([], .asAnswered)
            }
        case .writing(let body):
            outcome = Self.ending(body, answer: answer, terms: terms, keepOrDiscard: keepOrDiscard(body))
        }
        state = .ended(outcome.end, body)
        return outcome
    }

    private static func ending(_ body: Body, answer: Answer, terms: DownloadTerms?, keepOrDiscard: [Action]) -> (
        actions: [Action], end: End
    ) {
        guard terms != nil else { return ([], answer == .failure ? .transportFailed : .complete) }
        if answer == .failure { return ([.close] + keepOrDiscard, .transportFailed) }
        if let complete = body.completeLength, body.written != complete {
            if body.written > complete {
                return ([.close, .discard], .failed(.overlong(written: body.written, completeLength: complete)))
            }
            return ([.close] + keepOrDiscard, .incomplete(written: body.written, completeLength: complete))
        }
        return ([.close, .moveIntoPlace], .complete)
    }

    /// The move into place failed (the destination appeared and may not be replaced, or `rename`
    /// failed): the file is dropped.
    mutating func moveFailed() -> [Action] {
        guard case .ended(.complete, let body) = state else { return [] }
        state = .ended(.failed(.sinkFailed), body)
        return [.discard]
    }

    // MARK: Rules

    /// A download's part is kept when it can be resumed: the download resumes, and the part has
    /// bytes and a validator (the one it was written with, or, before a new head, the one the
    /// request resumed with).
    private func keepOrDiscard(_ body: Body?) -> [Action] {
        guard let terms else { return [] }
        let keeps: Bool
        if let body {
            keeps = body.written > 0 && body.validator != nil
        } else {
            keeps = terms.resumeOffset > 0 && terms.resumed?.validator != nil
        }
        return terms.resumes && keeps ? [.keepPart] : [.discard]
    }

    /// Whether a `206` is of another version of the file than the part on disk: it names another
    /// validator than `If-Range` sent (an `ETag` against an `ETag`, a `Last-Modified` against a
    /// date), or another complete length than the part was written for. A `206` that names no
    /// validator is taken on the server's word that `If-Range` matched.
    static func isAnotherVersion(sent: ResumeRecord, answered headers: [String: String], range: ContentRange)
        -> Bool
    {
        func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
                .trimmingCharacters(in: .whitespaces)
        }
        if let complete = range.completeLength, let known = sent.completeLength, complete != known { return true }
        guard let validator = sent.validator else { return true }
        if validator.hasPrefix("\"") {
            if let etag = header("ETag"), etag != validator { return true }
        } else if let lastModified = header("Last-Modified") {
            let now = Date()
            if let sentDate = HTTPDate.parse(validator, now: now), let date = HTTPDate.parse(lastModified, now: now) {
                if sentDate != date { return true }
            } else if lastModified != validator {
                return true
            }
        }
        return false
    }

    private var discard: [Action] { terms == nil ? [] : [.discard] }

    private func record(of body: Body) -> ResumeRecord {
        ResumeRecord(url: terms?.requestURL, validator: body.validator, completeLength: body.completeLength)
    }
}
