import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a transport writes a streamed response's body into (``APITransportOptions/responseBody``, an
/// ``APIResponseBodySink``),
/// for a request sent with ``APIManager/bytes(for:)`` and its siblings: it calls
/// ``begin(statusCode:headers:)`` when the head arrives, then ``write(_:whenReady:)`` for each part of
/// a body it was told to stream (a `2xx` one), and keeps any other response's body in memory as
/// usual. It may call these from any thread, one at a time.
///
/// **Backpressure.** ``write(_:whenReady:)`` returns `false` once the consumer is more than
/// ``highWater`` bytes behind: the transport then reads no more until `whenReady` is called (when
/// the consumer has caught up to ``lowWater``), so a slow consumer never makes memory grow without
/// bound. A transport that cannot stop reading (URLSession on Linux) goes on writing: past
/// ``memoryLimit`` the parts wait in a temporary file (owner-only, unlinked at once, so nothing is
/// left behind) and reach the consumer from there, in order; memory stays bounded and nothing is
/// lost. The file holds at most ``spillLimit`` bytes: past it, or when no file can be made (no
/// temporary directory, a full disk), the stream fails after the parts it holds, with
/// ``APIError/responseTooLarge(limit:)`` (``memoryLimit`` plus ``spillLimit``) or
/// ``APIError/transport(underlying:)`` (the file system's error); the stream then stops its
/// transfer, and the task fails with the same error.
public final class APIResponseBodyStream: APIResponseBodySink {
    /// The most bytes held for the consumer before the transport is asked to wait: 4 MiB.
    public static let highWater = 4 << 20
    /// The bytes held at which a waiting transport goes on: 1 MiB.
    public static let lowWater = 1 << 20
    /// The most bytes held in memory for the consumer, whatever the transport: 8 MiB. Parts written
    /// past it (by a transport that did not wait) go to a temporary file.
    public static let memoryLimit = 8 << 20

    /// The most bytes a stream's temporary file holds for a consumer that fell behind: 512 MiB
    /// unless set. Read when a stream is made; set it before sending. Past it the stream fails with
    /// ``APIError/responseTooLarge(limit:)``.
    public static var spillLimit: Int64 {
        get { spillLimitSetting.withLock { $0 } }
        set { spillLimitSetting.withLock { $0 = max(0, newValue) } }
    }
    private static let spillLimitSetting = LockedState<Int64>(512 << 20)

    let buffer: StreamBuffer
    /// The machine, and the transfer to stop when the stream fails under it.
    private struct Sink {
        /// Decides what each of the transport's calls does: nothing reaches the consumer after the
        /// attempt was cancelled or the stream failed.
        var machine: TransferMachine
        /// The transport's handle, once it took the request (``attach(_:)``).
        var transfer: (any APICancellable)?
        /// Whether the stream failed (its overflow) before the handle was attached.
        var stopsTransfer = false
    }
    private let sink: LockedState<Sink>

    init(buffer: StreamBuffer) {
        self.buffer = buffer
        sink = LockedState(Sink(machine: TransferMachine(sink: .stream(eventStream: buffer.expectsEventStream))))
    }

    /// The transport took the request: its handle stops the transfer if the stream fails under it.
    func attach(_ transfer: any APICancellable) {
        let stopsNow = sink.withLock { sink -> Bool in
            sink.transfer = transfer
            return sink.stopsTransfer
        }
        if stopsNow { transfer.cancel() }
    }

    /// The head arrived. Returns whether the body is streamed (a `2xx`, and for an event stream a
    /// `200 text/event-stream`); any other status: `false`, keep the body in memory. A head after
    /// the attempt was cancelled streams nothing.
    public func begin(statusCode: Int, headers: [String: String]) -> Bool {
        let streams = sink.withLock { sink in
            _ = sink.machine.head(statusCode: statusCode, headers: headers)
            return sink.machine.isWriting
        }
        buffer.status.withLock { $0 = statusCode }
        return streams
    }

    /// Hands a part of the body to the consumer. Returns `true` to go on reading; `false` to wait
    /// until `whenReady` is called. A part written after the attempt was cancelled is dropped.
    public func write(_ data: Data, whenReady: @escaping @Sendable () -> Void) -> Bool {
        // Pushed under the machine's lock, so a part cannot reach the consumer after a cancellation.
        let (goOn, stop) = sink.withLock { sink -> (Bool, (any APICancellable)?) in
            guard sink.machine.part(count: data.count) == [.write] else { return (true, nil) }
            let goOn = buffer.push(data, whenReady: whenReady)
            guard buffer.failedHere else { return (goOn, nil) }
            // The stream failed under the transport (its overflow): the transfer goes no further,
            // and the attempt fails with the stream's error.
            _ = sink.machine.writeFailed()
            sink.stopsTransfer = sink.transfer == nil
            return (true, sink.transfer)
        }
        stop?.cancel()
        return goOn
    }

    /// The attempt was cancelled: parts the transport still writes are dropped, and its answer,
    /// success included (a body it read before the cancellation reached it), does not end the
    /// stream; the task's cancellation does.
    func cancel() {
        sink.withLock { _ = $0.machine.cancel() }
    }

    /// The transport answered: how the attempt goes on. A `2xx` body the transport gave whole (it
    /// does not stream, or a stored copy) goes through the machine as a head and one part first.
    func finish(_ answer: Result<APIRawResponse, any Error>) -> TransferMachine.End {
        sink.withLock { sink in
            if case .success(let raw) = answer {
                buffer.status.withLock { $0 = raw.statusCode }
                if sink.machine.state == .awaitingHead {
                    _ = sink.machine.head(statusCode: raw.statusCode, headers: raw.headers)
                    if sink.machine.part(count: raw.body.count) == [.write] {
                        _ = buffer.push(raw.body) {}
                        if buffer.failedHere { _ = sink.machine.writeFailed() }
                    }
                }
            }
            let taken: TransferMachine.Answer
            switch answer {
            case .success(let raw): taken = .success(statusCode: raw.statusCode)
            case .failure: taken = .failure
            }
            return sink.machine.answer(taken)?.end ?? .cancelled
        }
    }

    /// The machine as it stands (tests).
    var state: TransferMachine { sink.withLock { $0.machine } }
}

/// The body parts between a transport and the consumer of ``APIByteStream``: bounded (see
/// ``APIResponseBodyStream``), ended by the task's end.
final class StreamBuffer: Sendable {
    private struct State {
        var chunks: [Data] = []
        var head = 0
        var bytes = 0
        var pushed = 0
        /// Parts that came past ``APIResponseBodyStream/memoryLimit``, after every part in `chunks`.
        var overflow: SpillFile?
        var waiter: CheckedContinuation<Data?, any Error>?
        var whenReady: (@Sendable () -> Void)?
        var end: Result<Void, APIError>?
        /// A copy of every part, for the cache, while it is at most the limit (see ``keepCopy(upTo:)``);
        /// `nil` when none is kept or it went past the limit.
        var copy: Data?
        var copyLimit = 0
        /// Whether the stream failed here (its overflow), not with its task: the stream then stops
        /// its transfer, and the task fails with the same error.
        var failedHere = false
    }

    private let state = LockedState(State())
    /// The status of the response streamed (once its head arrived).
    let status = LockedState<Int?>(nil)
    /// Whether the body must be a `text/event-stream` answered with `200`
    /// (``APIManager/events(for:reconnection:)``): any other answer fails the task.
    let expectsEventStream: Bool

    /// The most bytes the overflow file may hold (``APIResponseBodyStream/spillLimit`` when made).
    let spillLimit: Int64

    /// Where the overflow file goes: the temporary directory unless given (tests).
    let spillDirectory: URL?

    init(
        expectsEventStream: Bool = false, spillLimit: Int64 = APIResponseBodyStream.spillLimit,
        spillDirectory: URL? = nil
    ) {
        self.expectsEventStream = expectsEventStream
        self.spillLimit = spillLimit
        self.spillDirectory = spillDirectory
    }

    /// Why a part cannot wait in the overflow file: past the limit, or the file refused it; `nil`
    /// when it was written.
    private func spill(_ data: Data, into overflow: SpillFile) -> APIError? {
        if overflow.unread + Int64(data.count) > spillLimit {
            return .responseTooLarge(limit: Int(clamping: Int64(APIResponseBodyStream.memoryLimit) + spillLimit))
        }
        return overflow.append(data) ? nil : .transport(underlying: overflow.failure ?? CocoaError(.fileWriteUnknown))
    }

    /// Adds a part; `false` when the consumer is too far behind (`whenReady` is kept and called
    /// once it has caught up, or when the stream ends).
    func push(_ data: Data, whenReady: @escaping @Sendable () -> Void) -> Bool {
        guard !data.isEmpty else { return true }
        let (waiter, goOn) = state.withLock { state -> (CheckedContinuation<Data?, any Error>?, Bool) in
            guard state.end == nil else { return (nil, true) }
            state.pushed += data.count
            if state.copy != nil {
                if state.pushed <= state.copyLimit { state.copy?.append(data) } else { state.copy = nil }
            }
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, true)
            }
            // Once a part waits on disk, every later one does, so they stay in order.
            if let overflow = state.overflow, !overflow.isEmpty {
                state.whenReady = whenReady
                // Kept in memory it would overtake the parts on disk: the stream fails after them.
                if let failure = spill(data, into: overflow) {
                    state.end = .failure(failure)
                    state.failedHere = true
                }
                return (nil, false)
            }
            if state.bytes + data.count > APIResponseBodyStream.memoryLimit {
                let overflow = state.overflow ?? SpillFile(in: spillDirectory)
                state.overflow = overflow
                state.whenReady = whenReady
                // No file, or past its limit: the stream fails after the parts in memory; memory
                // never holds more than the limit.
                if let failure = spill(data, into: overflow) {
                    state.end = .failure(failure)
                    state.failedHere = true
                }
                return (nil, false)
            }
            state.chunks.append(data)
            state.bytes += data.count
            guard state.bytes > APIResponseBodyStream.highWater else { return (nil, true) }
            state.whenReady = whenReady
            return (nil, false)
        }
        waiter?.resume(returning: data)
        return goOn
    }

    /// Keeps a copy of the parts while they total at most `limit` bytes (a stream whose request
    /// asks for the cache).
    func keepCopy(upTo limit: Int) {
        state.withLock { state in
            if state.copy == nil, state.pushed == 0 {
                state.copy = Data()
                state.copyLimit = limit
            }
        }
    }

    /// The whole body, when a copy was kept and it stayed within its limit.
    var keptCopy: Data? { state.withLock { $0.copy } }

    /// The bytes pushed so far (retries are refused once any went to the consumer).
    var pushedBytes: Int { state.withLock { $0.pushed } }

    /// The stream ends: with the task's end, or when the body is complete.
    func finish(_ result: Result<Void, APIError>) {
        // A waiting consumer means nothing is held: it gets the end at once.
        let (waiter, whenReady) = state.withLock {
            state -> (CheckedContinuation<Data?, any Error>?, (@Sendable () -> Void)?) in
            guard state.end == nil else { return (nil, nil) }
            state.end = result
            defer {
                state.waiter = nil
                state.whenReady = nil
            }
            return (state.waiter, state.whenReady)
        }
        whenReady?()
        waiter?.resume(with: result.map { nil })
    }

    /// The next part; `nil` at the end. Throws the task's error.
    func next() async throws -> Data? {
        try await withCheckedThrowingContinuation { continuation in
            let (answer, whenReady) = state.withLock { state -> (Result<Data?, any Error>?, (@Sendable () -> Void)?) in
                if state.head < state.chunks.count {
                    let chunk = state.chunks[state.head]
                    state.head += 1
                    state.bytes -= chunk.count
                    if state.head > 64, state.head * 2 > state.chunks.count {
                        state.chunks.removeFirst(state.head)
                        state.head = 0
                    }
                    var ready: (@Sendable () -> Void)?
                    if state.bytes <= APIResponseBodyStream.lowWater, state.overflow?.isEmpty != false {
                        ready = state.whenReady
                        state.whenReady = nil
                    }
                    return (.success(chunk), ready)
                }
                if let overflow = state.overflow, !overflow.isEmpty {
                    switch overflow.read(upTo: APIResponseBodyStream.lowWater) {
                    case .success(let chunk):
                        var ready: (@Sendable () -> Void)?
                        if overflow.isEmpty {
                            ready = state.whenReady
                            state.whenReady = nil
                        }
                        return (.success(chunk), ready)
                    case .failure(let error):
                        state.end = .failure(error)
                        state.overflow = nil
                        return (.failure(error), nil)
                    }
                }
                switch state.end {
                case .success?: return (.success(nil), nil)
                case .failure(let error)?: return (.failure(error), nil)
                case nil:
                    state.waiter = continuation
                    return (nil, nil)
                }
            }
            whenReady?()
            if let answer { continuation.resume(with: answer) }
        }
    }

    /// The bytes held in memory for the consumer.
    var heldBytes: Int { state.withLock { $0.bytes } }

    /// Whether the stream failed here (its overflow), not with its task.
    var failedHere: Bool { state.withLock { $0.failedHere } }

    /// Why the stream failed here (its overflow); `nil` when it did not.
    var failureHere: APIError? {
        state.withLock { state in
            guard state.failedHere, case .failure(let error) = state.end else { return nil }
            return error
        }
    }

    /// The bytes waiting in the overflow file.
    var spilledBytes: Int64 { state.withLock { $0.overflow?.unread ?? 0 } }

    /// The bytes the overflow file takes on disk (tests).
    var spillFileSize: Int64 { state.withLock { $0.overflow?.fileSize ?? 0 } }
}

/// A response body as it arrives: an async sequence of its parts (``APIManager/bytes(for:)``).
///
/// It ends when the body is complete, and throws the task's ``APIError`` if the task fails
/// (before or during the body). Ending the iteration early (a `break`, a thrown error, a cancelled
/// Swift task) cancels the API task. Iterate it once.
public struct APIByteStream: AsyncSequence, Sendable {
    public typealias Element = Data

    /// The task that sends the request.
    public let task: AnyAPITask
    let buffer: StreamBuffer
    /// The manager, kept alive while the stream is (a released manager cancels its tasks).
    let manager: any APIManager

    public func makeAsyncIterator() -> Iterator {
        Iterator(consumer: Consumer(task: task, buffer: buffer, manager: manager))
    }

    /// The bytes received and not yet read that are held in memory: at most about
    /// ``APIResponseBodyStream/highWater`` plus what the transport had in hand when it was asked to
    /// wait, and never more than ``APIResponseBodyStream/memoryLimit``.
    public var bufferedBytes: Int { buffer.heldBytes }

    /// The bytes received and not yet read that wait in a temporary file: 0 unless the transport
    /// could not wait for the consumer (URLSession on Linux) and ``bufferedBytes`` reached
    /// ``APIResponseBodyStream/memoryLimit``.
    public var spilledBytes: Int64 { buffer.spilledBytes }

    /// Reads the parts in order.
    public struct Iterator: AsyncIteratorProtocol {
        let consumer: Consumer

        public mutating func next() async throws -> Data? {
            try await consumer.next()
        }
    }

    /// Cancels the task when the iteration is abandoned before the end.
    final class Consumer: Sendable {
        let task: AnyAPITask
        let buffer: StreamBuffer
        let manager: any APIManager
        private let ended = LockedState(false)

        init(task: AnyAPITask, buffer: StreamBuffer, manager: any APIManager) {
            self.task = task
            self.buffer = buffer
            self.manager = manager
        }

        func next() async throws -> Data? {
            do {
                let chunk = try await withTaskCancellationHandler {
                    try await buffer.next()
                } onCancel: { [task] in
                    task.cancel(reason: .concurrency)
                }
                if chunk == nil { ended.withLock { $0 = true } }
                return chunk
            } catch {
                ended.withLock { $0 = true }
                // A stream that failed under the transport (its overflow) stopped the transfer
                // itself: its task fails with the same error.
                throw error
            }
        }

        deinit {
            if !ended.withLock({ $0 }) { task.cancel(reason: .concurrency) }
        }
    }
}

/// A temporary file that holds a stream's overflow, written at the end and read from the front.
/// The file is unlinked as soon as it is open, so it goes when the handle closes (or the process
/// ends). Used only under the stream buffer's lock.
final class SpillFile: @unchecked Sendable {
    // @unchecked: only touched under StreamBuffer's lock.
    private let writer: FileHandle?
    private let reader: FileHandle?
    /// Bytes appended (to the file or `pending`) and bytes read.
    private var written: Int64 = 0
    private var read: Int64 = 0
    /// Parts not yet written: written in runs of 256 KiB (a transport hands over 16 KiB at a time),
    /// or before a read that needs them.
    private var pending = Data()
    private static let runSize = 256 << 10

    /// Why the file could not be made or written, when it could not.
    private(set) var failure: (any Error)?

    init(in directory: URL? = nil) {
        // Owner-only, never through a planted link, and unlinked at once.
        let url = OwnerOnlyFile.temporaryURL(prefix: "apimanagerkit-stream", in: directory)
        do {
            let writer = try OwnerOnlyFile.create(at: url)
            self.writer = writer
            reader = try? FileHandle(forReadingFrom: url)
            if reader == nil { failure = CocoaError(.fileReadUnknown) }
        } catch {
            writer = nil
            reader = nil
            failure = error
        }
        unlink(url.path)
    }

    deinit {
        try? writer?.close()
        try? reader?.close()
    }

    var isEmpty: Bool { read == written }
    var unread: Int64 { written - read }

    /// Appends a part; `false` when it could not be written (then nothing of it was kept).
    func append(_ data: Data) -> Bool {
        guard writer != nil, reader != nil else { return false }
        if pending.isEmpty { pending.reserveCapacity(Self.runSize + data.count) }
        pending.append(data)
        if pending.count >= Self.runSize, !flush() {
            pending.removeLast(data.count)
            return false
        }
        written += Int64(data.count)
        return true
    }

    /// Writes the pending parts; `false` when the file refused them.
    private func flush() -> Bool {
        guard let writer, !pending.isEmpty else { return true }
        do {
            try writer.write(contentsOf: pending)
        } catch {
            failure = error
            return false
        }
        pending.removeAll(keepingCapacity: true)
        return true
    }

    /// Everything appended was read: the file is emptied and written from its start again, so a long
    /// stream whose consumer falls behind now and then keeps on disk only what it has not read, not
    /// every byte that ever waited there. A file that cannot be emptied goes on where it is.
    private func startOver() {
        guard let writer, let reader, pending.isEmpty else { return }
        // Not emptied: nothing changed, later parts are appended after the read ones.
        guard (try? writer.truncate(atOffset: 0)) != nil else { return }
        // Empty: both ends start at 0.
        try? writer.seek(toOffset: 0)
        try? reader.seek(toOffset: 0)
        written = 0
        read = 0
    }

    /// The bytes the file takes on disk (tests).
    var fileSize: Int64 {
        guard let writer else { return 0 }
        var info = stat()
        return fstat(writer.fileDescriptor, &info) == 0 ? Int64(info.st_size) : -1
    }

    /// The next bytes, at most `limit`, in the order they were appended.
    func read(upTo limit: Int) -> Result<Data, APIError> {
        guard let reader else { return .failure(.transport(underlying: CocoaError(.fileReadUnknown))) }
        // What is read may still be pending: everything appended goes to the file first.
        guard flush() else { return .failure(.transport(underlying: CocoaError(.fileWriteUnknown))) }
        do {
            let data = try reader.read(upToCount: Int(min(Int64(limit), unread))) ?? Data()
            guard !data.isEmpty else { return .failure(.transport(underlying: CocoaError(.fileReadCorruptFile))) }
            read += Int64(data.count)
            if isEmpty { startOver() }
            return .success(data)
        } catch {
            return .failure(.transport(underlying: error))
        }
    }
}
