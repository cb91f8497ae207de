// The transfer machine alone (issue 29, item 4): each event's actions, then a randomized driver
// that plays a server, a cancelling user and a file system against it and checks, after every
// event, that the destination is the server's whole file or absent, that a kept part is a prefix of
// the server's file, and that every byte acknowledged is in the file when the attempt ends.
import Foundation
import Testing

@testable import APIManagerKit

private let url = URL(string: "https://api.test/report.bin")
private let v1Record = ResumeRecord(url: url, validator: "\"v1\"", completeLength: 1_000)

private func download(
    resumeOffset: Int64 = 0, resumed: ResumeRecord? = nil, resumes: Bool = true, maxSize: Int64? = nil
)
    -> TransferMachine
{
    TransferMachine(
        sink: .download(
            TransferMachine.DownloadTerms(
                resumeOffset: resumeOffset, resumed: resumed, resumes: resumes, maxSize: maxSize, requestURL: url)))
}

/// A machine that resumes the first 300 bytes of v1.
private func resuming() -> TransferMachine {
    download(resumeOffset: 300, resumed: v1Record)
}

private let v1Head = ["ETag": "\"v1\"", "Content-Length": "1000"]
private let rangeHead = ["ETag": "\"v1\"", "Content-Range": "bytes 300-999/1000"]

/// The machine's answer to `answer`, required.
private func answered(_ machine: inout TransferMachine, _ answer: TransferMachine.Answer) throws -> (
    actions: [TransferMachine.Action], end: TransferMachine.End
) {
    let taken = machine.answer(answer)
    return try #require(taken)
}

@Suite("Transfer machine: each event's actions", .timeLimit(.minutes(1)))
struct TransferMachineTests {
    @Test func aWholeBodyIsWrittenThenMovedIntoPlace() throws {
        var machine = download()
        #expect(
            machine.head(statusCode: 200, headers: v1Head) == [
                .openFile(append: false, record: ResumeRecord(url: url, validator: "\"v1\"", completeLength: 1_000))
            ])
        #expect(machine.part(count: 600) == [.write])
        #expect(machine.part(count: 400) == [.write])
        let end = try answered(&machine, .success(statusCode: 200))
        #expect(end.actions == [.close, .moveIntoPlace])
        #expect(end.end == .complete)
        #expect(machine.answer(.success(statusCode: 200)) == nil, "a second answer changes nothing")
    }

    @Test func aRangeThatContinuesThePartIsAppended() throws {
        var machine = resuming()
        #expect(machine.head(statusCode: 206, headers: rangeHead) == [.openFile(append: true, record: v1Record)])
        #expect(
            machine.body == TransferMachine.Body(start: 300, written: 300, completeLength: 1_000, validator: "\"v1\""))
        #expect(machine.part(count: 700) == [.write])
        #expect(machine.answer(.success(statusCode: 206))?.end == .complete)
    }

    @Test func aRangeWithoutAValidatorKeepsTheOneIfRangeSent() {
        var machine = resuming()
        #expect(
            machine.head(statusCode: 206, headers: ["Content-Range": "bytes 300-999/1000"]) == [
                .openFile(append: true, record: v1Record)
            ], "the part stays resumable")
    }

    @Test(arguments: ["bytes 100-999/1000", "bytes 300-999/999", "bytes 300-299/1000", "items 300-999/1000", ""])
    func aRangeThatDoesNotContinueThePartFailsAndDropsIt(contentRange: String) throws {
        var machine = resuming()
        #expect(machine.head(statusCode: 206, headers: ["ETag": "\"v1\"", "Content-Range": contentRange]).isEmpty)
        #expect(machine.part(count: 100) == [.drop])
        let end = try answered(&machine, .failure)
        #expect(end.actions == [.discard])
        #expect(end.end == .failed(.rangeDoesNotContinue))
    }

    @Test(arguments: [
        ["ETag": "\"v2\"", "Content-Range": "bytes 300-999/1000"],
        ["ETag": "\"v1\"", "Content-Range": "bytes 300-1199/1200"],
    ])
    func aRangeOfAnotherVersionStartsOver(headers: [String: String]) throws {
        var machine = resuming()
        #expect(machine.head(statusCode: 206, headers: headers).isEmpty)
        #expect(machine.failure == .anotherVersion)
        let end = try answered(&machine, .failure)
        #expect(end.actions == [.discard])
        #expect(end.end == .startOver)
    }

    @Test func aRangeToARequestThatResumesNothingFails() {
        var machine = download()
        #expect(machine.head(statusCode: 206, headers: rangeHead).isEmpty)
        #expect(machine.failure == .rangeDoesNotContinue)
    }

    @Test func refusedRangeStartsOverAndAnotherRefusalIsAnAnswer() throws {
        var resumed = resuming()
        #expect(resumed.head(statusCode: 416, headers: [:]).isEmpty)
        #expect(resumed.part(count: 10) == [.drop], "a refusal's body stays the transport's")
        let end = try answered(&resumed, .success(statusCode: 416))
        #expect(end.actions == [.discard])
        #expect(end.end == .startOver)
        var fresh = download()
        _ = fresh.head(statusCode: 416, headers: [:])
        #expect(fresh.answer(.success(statusCode: 416))?.end == .asAnswered)
    }

    @Test func anErrorStatusLeavesThePartOnDiskAlone() throws {
        var machine = resuming()
        #expect(machine.head(statusCode: 503, headers: [:]).isEmpty)
        #expect(machine.state == .inMemory)
        let end = try answered(&machine, .success(statusCode: 503))
        #expect(end.actions.isEmpty)
        #expect(end.end == .asAnswered)
    }

    @Test func aLateHeadOrPartAfterACancellationNeverReachesTheFile() throws {
        var machine = resuming()
        #expect(machine.cancel().isEmpty, "no file open yet")
        #expect(machine.head(statusCode: 200, headers: v1Head) == [.drop], "never opens (nor empties) the part")
        #expect(machine.part(count: 100) == [.drop])
        let end = try answered(&machine, .success(statusCode: 200))
        #expect(end.actions == [.keepPart], "the resumed part stays")
        #expect(end.end == .cancelled)
    }

    @Test func aCancellationWhileWritingClosesTheFileAndASuccessAfterItIsACancellation() throws {
        var machine = download()
        _ = machine.head(statusCode: 200, headers: v1Head)
        _ = machine.part(count: 300)
        #expect(machine.cancel() == [.close])
        #expect(machine.cancel().isEmpty, "once")
        #expect(machine.part(count: 700) == [.drop], "what the transport still had in hand")
        let end = try answered(&machine, .success(statusCode: 200))
        #expect(end.actions == [.keepPart])
        #expect(end.end == .cancelled)
    }

    @Test func aCancelledPartIsDiscardedWhenItCannotBeResumed() throws {
        var noValidator = download()
        _ = noValidator.head(statusCode: 200, headers: ["Content-Length": "1000"])
        _ = noValidator.part(count: 300)
        _ = noValidator.cancel()
        #expect(noValidator.answer(.failure)?.actions == [.discard])
        var notResuming = download(resumes: false)
        _ = notResuming.head(statusCode: 200, headers: v1Head)
        _ = notResuming.part(count: 300)
        _ = notResuming.cancel()
        #expect(notResuming.answer(.failure)?.actions == [.discard])
        var nothingWritten = download()
        _ = nothingWritten.head(statusCode: 200, headers: v1Head)
        _ = nothingWritten.cancel()
        #expect(nothingWritten.answer(.failure)?.actions == [.discard])
    }

    @Test func aCancellationAfterTheAnswerChangesNothing() throws {
        var machine = download()
        _ = machine.head(statusCode: 200, headers: v1Head)
        _ = machine.part(count: 1_000)
        #expect(machine.answer(.success(statusCode: 200))?.actions == [.close, .moveIntoPlace])
        #expect(machine.cancel().isEmpty, "the move is under way: it is not undone")
        #expect(machine.state == .ended(.complete, machine.body))
        #expect(machine.body?.written == 1_000)
        #expect(machine.part(count: 1) == [.drop], "a part after the answer")
    }

    @Test func aFailedMoveDropsTheFile() {
        var machine = download()
        _ = machine.head(statusCode: 200, headers: v1Head)
        _ = machine.part(count: 1_000)
        _ = machine.answer(.success(statusCode: 200))
        #expect(machine.moveFailed() == [.discard])
        #expect(machine.state == .ended(.failed(.sinkFailed), machine.body))
    }

    @Test func aCutConnectionKeepsTheResumablePart() throws {
        var machine = download()
        _ = machine.head(statusCode: 200, headers: v1Head)
        _ = machine.part(count: 400)
        let end = try answered(&machine, .failure)
        #expect(end.actions == [.close, .keepPart])
        #expect(end.end == .transportFailed)
        var beforeTheHead = resuming()
        #expect(beforeTheHead.answer(.failure)?.actions == [.keepPart])
    }

    @Test func aBodyShorterThanItsCompleteLengthIsIncompleteAndALongerOneIsDropped() throws {
        var short = resuming()
        _ = short.head(statusCode: 206, headers: ["ETag": "\"v1\"", "Content-Range": "bytes 300-399/1000"])
        _ = short.part(count: 100)
        let shortEnd = try answered(&short, .success(statusCode: 206))
        #expect(shortEnd.actions == [.close, .keepPart])
        #expect(shortEnd.end == .incomplete(written: 400, completeLength: 1_000))
        var long = download()
        _ = long.head(statusCode: 200, headers: v1Head)
        _ = long.part(count: 1_200)
        let longEnd = try answered(&long, .success(statusCode: 200))
        #expect(longEnd.actions == [.close, .discard])
        #expect(longEnd.end == .failed(.overlong(written: 1_200, completeLength: 1_000)))
    }

    @Test func anEncodedBodyHasNoCompleteLength() {
        var machine = download()
        _ = machine.head(
            statusCode: 200, headers: ["ETag": "\"v1\"", "Content-Length": "10", "Content-Encoding": "gzip"])
        #expect(machine.body?.completeLength == nil)
    }

    @Test func pastTheSizeLimitTheFileIsClosedAndDropped() throws {
        var machine = download(maxSize: 500)
        _ = machine.head(statusCode: 200, headers: v1Head)
        #expect(machine.part(count: 500) == [.write])
        #expect(machine.part(count: 1) == [.drop, .close])
        #expect(machine.part(count: 1) == [.drop])
        let end = try answered(&machine, .failure)
        #expect(end.actions == [.discard])
        #expect(end.end == .failed(.tooLarge(limit: 500)))
    }

    @Test func aFailedWriteOrOpenFailsTheAttempt() throws {
        var write = download()
        _ = write.head(statusCode: 200, headers: v1Head)
        _ = write.part(count: 10)
        #expect(write.writeFailed() == [.close])
        #expect(write.answer(.success(statusCode: 200))?.end == .failed(.sinkFailed))
        var open = resuming()
        _ = open.head(statusCode: 206, headers: rangeHead)
        #expect(open.openFailed(.notOurFile).isEmpty)
        #expect(open.part(count: 10) == [.drop])
        #expect(open.answer(.failure)?.end == .failed(.notOurFile))
    }

    @Test func anEventStreamGoesToItsConsumerOnlyWhenItIsOne() {
        for (status, type, streams) in [
            (200, "text/event-stream; charset=utf-8", true), (200, "text/html", false),
            (204, "text/event-stream", false),
            (201, "text/event-stream", false),
        ] {
            var machine = TransferMachine(sink: .stream(eventStream: true))
            _ = machine.head(statusCode: status, headers: ["content-type": type])
            #expect(machine.isWriting == streams, "\(status) \(type)")
        }
        var bytes = TransferMachine(sink: .stream(eventStream: false))
        _ = bytes.head(statusCode: 201, headers: ["Content-Type": "text/html"])
        #expect(bytes.isWriting, "a byte stream takes any 2xx body")
    }

    @Test func aStreamWritesWithoutAFileAndACancellationDropsLaterParts() throws {
        var machine = TransferMachine(sink: .stream(eventStream: false))
        #expect(machine.head(statusCode: 200, headers: [:]).isEmpty)
        #expect(machine.part(count: 10) == [.write])
        #expect(machine.cancel().isEmpty)
        #expect(machine.part(count: 10) == [.drop])
        #expect(machine.answer(.success(statusCode: 200))?.end == .cancelled)
        var whole = TransferMachine(sink: .stream(eventStream: false))
        _ = whole.head(statusCode: 200, headers: [:])
        #expect(whole.answer(.success(statusCode: 200))?.end == .complete)
    }
}

@Suite("Transfer machine: invariants under random events", .timeLimit(.minutes(1)))
struct TransferMachineRandomTests {
    /// A file system as the machine's actions leave it.
    private struct Disk: Equatable {
        var partial: [UInt8]?
        var record: ResumeRecord?
        var destination: [UInt8]?
        var open = false
    }

    /// The server's file: two versions of different lengths and bytes.
    private static func file(_ version: Int, length: Int) -> [UInt8] {
        (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ version &* 7) }
    }

    @Test(arguments: 0..<8)
    func theDestinationIsTheWholeFileOrAbsentAndAKeptPartIsAPrefix(seed: UInt64) throws {
        var random = SplitMix64(state: 29_000 + seed)
        for _ in 0..<400 {
            try run(&random)
        }
    }

    private func run(_ random: inout SplitMix64) throws {
        let versions = [Self.file(1, length: Int.random(in: 1...40, using: &random)), Self.file(2, length: 37)]
        let etags = ["\"v1\"", "\"v2\""]
        var disk = Disk()
        // A part of v1 already on disk (with its record), or nothing.
        var offset = 0
        if Bool.random(using: &random), versions[0].count > 1 {
            offset = Int.random(in: 1..<versions[0].count, using: &random)
            disk.partial = Array(versions[0].prefix(offset))
            disk.record = ResumeRecord(url: url, validator: etags[0], completeLength: Int64(versions[0].count))
        }
        var machine = download(
            resumeOffset: Int64(offset), resumed: disk.record, resumes: Bool.random(using: &random),
            maxSize: Bool.random(using: &random) ? Int64.random(in: 1...45, using: &random) : nil)

        // What the server answers: which version, from which byte, with which status and headers.
        let version = Int.random(in: 0...1, using: &random)
        let whole = versions[version]
        var status = 200
        var headers = ["ETag": etags[version], "Content-Length": String(whole.count)]
        var from = 0
        switch Int.random(in: 0..<6, using: &random) {
        case 0 where offset > 0:
            status = 206
            from = offset
            headers = ["ETag": etags[version], "Content-Range": "bytes \(from)-\(whole.count - 1)/\(whole.count)"]
        case 1 where offset > 0:
            // A range from another byte, or one whose last position passes the length.
            status = 206
            from = Int.random(in: 0..<whole.count, using: &random)
            headers = ["ETag": etags[version], "Content-Range": "bytes \(from)-\(whole.count)/\(whole.count)"]
        case 2:
            status = [416, 404, 503].randomElement(using: &random) ?? 503
            headers = [:]
        default:
            break
        }
        if from >= whole.count { from = 0 }
        let body = Array(whole[from...])

        var sent = 0
        var acknowledged = 0
        var headSent = false
        var ended: TransferMachine.End?
        var chunk: [UInt8] = []
        var cancelledWith: Disk?
        var cancelsNow = false
        // Events in a random order: the head first when it comes, parts in order, a cancellation and
        // the answer anywhere, and late parts after them.
        for _ in 0..<(body.count + 6) {
            let roll = Int.random(in: 0..<10, using: &random)
            var actions: [TransferMachine.Action] = []
            if roll == 0 {
                // The user cancels; unless the body had already failed, the attempt ends cancelled.
                if cancelledWith == nil, machine.failure == nil { cancelsNow = true }
                actions = machine.cancel()
            } else if roll == 1 || (headSent && sent == body.count && roll < 4) {
                // A success for the whole body, or (as a transport that took a cut body for whole
                // does) for part of it; else a failure.
                let answer: TransferMachine.Answer =
                    headSent && (sent == body.count || roll == 1) && Bool.random(using: &random)
                    ? .success(statusCode: status) : .failure
                if let (taken, end) = machine.answer(answer) {
                    actions = taken
                    ended = end
                }
            } else if !headSent {
                headSent = true
                actions = machine.head(statusCode: status, headers: headers)
            } else if sent < body.count {
                let size = min(body.count - sent, Int.random(in: 1...9, using: &random))
                chunk = Array(body[sent..<(sent + size)])
                sent += size
                actions = machine.part(count: size)
                if actions == [.write] { acknowledged = Int(machine.body?.written ?? 0) }
            }
            try perform(actions, chunk: chunk, disk: &disk, machine: &machine, acknowledged: &acknowledged)
            try check(disk, versions: versions, etags: etags)
            if cancelsNow {
                cancelsNow = false
                cancelledWith = disk
            }
            if let cancelledWith, ended == nil {
                #expect(disk.partial == cancelledWith.partial, "nothing reaches the file after a cancellation")
            }
            if ended != nil { break }
        }
        if ended == nil, let (actions, end) = machine.answer(.failure) {
            ended = end
            try perform(actions, chunk: [], disk: &disk, machine: &machine, acknowledged: &acknowledged)
            try check(disk, versions: versions, etags: etags)
        }
        if cancelledWith != nil { #expect(ended == .cancelled, "a cancelled attempt ends cancelled") }
        // Every byte acknowledged is in the file when the attempt ends with it kept or moved.
        switch ended {
        case .complete:
            #expect(disk.destination?.count == acknowledged)
        case .cancelled, .transportFailed, .incomplete:
            if let partial = disk.partial, machine.body != nil { #expect(partial.count == acknowledged) }
        default:
            break
        }
        #expect(!disk.open, "the file is closed when the attempt ends")
    }

    private func perform(
        _ actions: [TransferMachine.Action], chunk: [UInt8], disk: inout Disk, machine: inout TransferMachine,
        acknowledged: inout Int
    ) throws {
        for action in actions {
            switch action {
            case .openFile(let append, let record):
                if append {
                    #expect(disk.partial?.count == Int(machine.body?.start ?? -1), "appends at the end of the part")
                } else {
                    disk.partial = []
                }
                disk.record = record
                disk.open = true
                acknowledged = Int(machine.body?.written ?? 0)
            case .write:
                #expect(disk.open, "a write goes to an open file")
                disk.partial?.append(contentsOf: chunk)
            case .drop, .keepPart:
                break
            case .close:
                disk.open = false
            case .discard:
                disk = Disk(partial: nil, record: nil, destination: disk.destination, open: false)
            case .moveIntoPlace:
                #expect(!disk.open)
                disk.destination = disk.partial
                disk.partial = nil
                disk.record = nil
            }
        }
    }

    private func check(_ disk: Disk, versions: [[UInt8]], etags: [String]) throws {
        if let destination = disk.destination {
            #expect(versions.contains(destination), "the destination is a whole version of the file")
        }
        // A part at rest (the file closed) with a validator is a prefix of the version it names.
        if !disk.open, let partial = disk.partial, let validator = disk.record?.validator {
            let index = try #require(etags.firstIndex(of: validator))
            #expect(
                versions[index].starts(with: partial) && partial.count <= versions[index].count,
                "a kept part is a prefix of the server's file")
        }
    }

    /// A stream's machine under random events: nothing reaches the consumer before a head it takes
    /// (a `2xx`; for an event stream a `200 text/event-stream`), after a cancellation, or after the
    /// answer; a cancelled attempt ends cancelled whatever the transport answers.
    @Test(arguments: 0..<4)
    func aStreamTakesPartsOnlyBetweenItsHeadAndItsEnd(seed: UInt64) {
        var random = SplitMix64(state: 2_900 + seed)
        for _ in 0..<500 {
            let eventStream = Bool.random(using: &random)
            var machine = TransferMachine(sink: .stream(eventStream: eventStream))
            var takes = false
            var cancelled = false
            var ended: TransferMachine.End?
            for _ in 0..<12 {
                switch Int.random(in: 0..<5, using: &random) {
                case 0:
                    let status = [200, 200, 204, 404].randomElement(using: &random) ?? 200
                    let type = ["text/event-stream", "text/html"].randomElement(using: &random) ?? "text/html"
                    let wasAwaiting = machine.state == .awaitingHead
                    _ = machine.head(statusCode: status, headers: ["Content-Type": type])
                    if wasAwaiting, !cancelled, ended == nil {
                        takes =
                            eventStream ? status == 200 && type == "text/event-stream" : (200..<300).contains(status)
                    }
                case 1:
                    let writes = machine.part(count: 10) == [.write]
                    #expect(writes == (takes && !cancelled && ended == nil), "a part is taken only while streaming")
                case 2:
                    _ = machine.cancel()
                    if ended == nil, machine.failure == nil { cancelled = true }
                case 3:
                    let answer: TransferMachine.Answer =
                        Bool.random(using: &random) ? .success(statusCode: 200) : .failure
                    if let (_, end) = machine.answer(answer) {
                        #expect(ended == nil, "one end")
                        ended = end
                        if cancelled { #expect(end == .cancelled) }
                        if end == .complete { #expect(takes && answer != .failure) }
                    }
                default:
                    break
                }
            }
        }
    }
}
