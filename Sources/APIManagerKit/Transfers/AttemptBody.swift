import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where one attempt's response body goes: memory (every plain request), a download's file or a
/// stream. The engine's stages ask it, and never the task's transfer fields, so a plain response
/// passes through no transfer code.
enum AttemptBody {
    case memory
    /// A download's file (``APIDownload``), with its ``TransferMachine``.
    case download(APIResponseBodyFile)
    /// A streamed body's sink (``APIManager/bytes(for:)``), with its ``TransferMachine``.
    case stream(APIResponseBodyStream)

    /// The body of an attempt of `task` about to be sent: for a download, the destination is
    /// checked and claimed, and the request asks for the rest of a partial file that can be
    /// resumed (``DownloadStage/prepare(_:request:)``); a stream keeps a copy of its body for the
    /// cache when `keepsCopy`.
    static func prepare(for task: AnyAPITask, request: inout URLRequest, keepsCopy: Bool) -> Result<
        AttemptBody, APIError
    > {
        if let download = task.bag.download {
            return DownloadStage.prepare(download, request: &request).map(AttemptBody.download)
        }
        if let buffer = task.bag.bodyStream {
            if keepsCopy { buffer.keepCopy(upTo: APIRequestDefaults.maxCachedTransferSize) }
            return .success(.stream(APIResponseBodyStream(buffer: buffer)))
        }
        return .success(.memory)
    }

    /// Tells the transport where the body goes.
    func apply(to options: inout APITransportOptions) {
        switch self {
        case .memory: break
        case .download(let file): options.responseBody = file
        case .stream(let stream): options.responseBody = stream
        }
    }

    var isMemory: Bool {
        if case .memory = self { return true }
        return false
    }

    /// The download's file, for its progress (a resumed download counts the part on disk).
    var file: APIResponseBodyFile? {
        if case .download(let file) = self { return file }
        return nil
    }

    /// The handle the machine keeps for the transport's: cancelling it tells the body's machine
    /// first (nothing later reaches the file or the consumer), then the transport. A transport may
    /// still hand over parts after the cancellation (URLSession delivers what it already read),
    /// and may even answer with success: the machine drops those parts, keeps a download's part as
    /// it was, and makes the answer a cancellation, so a cut body never passes for a whole one.
    func handle(_ transfer: any APICancellable) -> any APICancellable {
        switch self {
        case .memory: return transfer
        case .download(let file): return CancellingFirst(body: file.cancel, transfer: transfer)
        case .stream(let stream):
            stream.attach(transfer)
            return CancellingFirst(body: stream.cancel, transfer: transfer)
        }
    }

    private struct CancellingFirst: APICancellable {
        let body: @Sendable () -> Void
        let transfer: any APICancellable

        func cancel() {
            body()
            transfer.cancel()
        }
    }

    /// What the attempt goes on with once the body's machine took the transport's answer.
    enum Received {
        case answer(Result<APIRawResponse, any Error>)
        /// Send again from byte 0 (a `416` to a range, a `206` of another version).
        case startOver
    }

    /// The transport answered: the body's machine decides. `mayRetry` turns `false` once part of a
    /// streamed body reached its consumer (another attempt would repeat it).
    func receive(_ answer: Result<APIRawResponse, any Error>, mayRetry: inout Bool) -> Received {
        switch self {
        case .memory:
            return .answer(answer)
        case .download(let file):
            switch DownloadStage.complete(file, answer: answer) {
            case .answer(let completed): return .answer(completed)
            case .startOver: return .startOver
            }
        case .stream(let stream):
            return .answer(Self.receive(answer, into: stream, mayRetry: &mayRetry))
        }
    }

    private static func receive(
        _ answer: Result<APIRawResponse, any Error>, into stream: APIResponseBodyStream, mayRetry: inout Bool
    ) -> Result<APIRawResponse, any Error> {
        switch stream.finish(answer) {
        case .cancelled:
            // A cut body never ends the stream as whole: the task's cancellation ends it.
            return .failure(URLError(.cancelled))
        case .failed:
            // The stream failed under the transport (its overflow) and stopped the transfer: the
            // attempt fails with its error, and is not repeated (the consumer had parts of it).
            mayRetry = false
            return .failure(stream.buffer.failureHere ?? .transport(underlying: URLError(.cannotWriteToFile)))
        default:
            break
        }
        switch answer {
        case .success(let raw)
        where stream.buffer.expectsEventStream && (200..<300).contains(raw.statusCode) && raw.statusCode != 204
            && !APIServerSentEvent.Stream.isEventStream(
                statusCode: raw.statusCode, contentType: raw.value(forHeader: "Content-Type")):
            // HTML §9.2.3: anything but a 200 text/event-stream fails the connection, for good.
            return .failure(
                APIError.rejected(
                    underlying: APIServerSentEvent.Stream.NotAnEventStream(
                        statusCode: raw.statusCode, contentType: raw.value(forHeader: "Content-Type")),
                    response: raw))
        case .success(var raw) where (200..<300).contains(raw.statusCode):
            // The stream ends with the task (ManagedTask.deliver), once its typed response built or
            // failed to: a response that does not build ends it with that error. A body the
            // transport gave whole went to the stream in `finish`.
            if stream.buffer.pushedBytes > 0 { mayRetry = false }
            raw.body = Data()
            return .success(raw)
        case .failure where stream.buffer.pushedBytes > 0:
            // Part of the body reached the consumer: another attempt would repeat it.
            mayRetry = false
            return answer
        case .success, .failure:
            return answer
        }
    }

    /// The bytes of the response the attempt received, for its last progress report: those
    /// written to a download's file, else the body's.
    func receivedBytes(of raw: APIRawResponse) -> Int64 {
        if case .download(let file) = self, let written = file.writtenBodyBytes { return written }
        return Int64(raw.body.count)
    }
}

extension TaskBag {
    /// Whether the task's body goes to a file or a stream: it then uses the cache only when its
    /// request asks (see ``TransferCacheStage``).
    @inline(__always) var isTransfer: Bool { download != nil || bodyStream != nil }
}
