import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIRequestBody {
    /// Puts the body on `request`: bytes as `httpBody`; a file, or a form too large for memory, as
    /// `httpBodyStream` with its `Content-Length`; a stream as a new `httpBodyStream`, with its
    /// `Content-Length` when its length is known. Returns the `Content-Type` to send unless the
    /// request names one. A form sets its own, whatever the request's headers say: its boundary is
    /// known only once it is written.
    func apply(to request: inout URLRequest) throws(APIError) -> String? {
        if let form {
            var multipart = form.form
            let length = try multipart.contentLength()
            if length <= Int64(form.inMemoryLimit) {
                request.httpBody = try multipart.encoded()
            } else if BodyFile.defersForms {
                // The engine's transport writes it from its files (APITransportOptions.bodyWriter).
                let placeholder = InputStream(data: Data())
                request.httpBodyStream = placeholder
                if request.value(forHTTPHeaderField: "Content-Length") == nil {
                    request.setValue(String(length), forHTTPHeaderField: "Content-Length")
                }
                BodyFile.register(
                    BodyFile(deferring: APIRequestBody.Writer(form: multipart, length: length)), for: placeholder)
            } else {
                let file = BodyFile(url: BodyFile.newTemporaryURL(), isTemporary: true)
                try multipart.write(to: file.url)
                try stream(file, into: &request)
            }
            request.setValue(multipart.contentType, forHTTPHeaderField: "Content-Type")
            return nil
        }
        if let fileURL {
            try stream(BodyFile(url: fileURL, isTemporary: false), into: &request)
            return contentType
        }
        if let source {
            do {
                request.httpBodyStream = try source.make()
            } catch {
                throw .invalidRequest(reason: "the body stream could not be opened", underlying: error)
            }
            if let length = source.length, request.value(forHTTPHeaderField: "Content-Length") == nil {
                request.setValue(String(length), forHTTPHeaderField: "Content-Length")
            }
            return contentType
        }
        request.httpBody = data
        return contentType
    }

    private func stream(_ file: BodyFile, into request: inout URLRequest) throws(APIError) {
        let url = file.url
        let size = try FileSource.size(of: url)
        _ = try FileSource.head(of: url, count: 0)  // readable: fail here, typed, rather than in the transport
        guard let stream = InputStream(url: url) else {
            throw FileSource.unreadable(url, CocoaError(.fileReadUnknown))
        }
        request.httpBodyStream = stream
        if request.value(forHTTPHeaderField: "Content-Length") == nil {
            request.setValue(String(size), forHTTPHeaderField: "Content-Length")
        }
        BodyFile.register(file, for: stream)
    }
}

/// The file a built request's body streams from (its `httpBodyStream`): a file the request gave,
/// or a temporary one holding a multipart body too large for memory, which is removed when the last
/// owner lets go of it (the attempt that sends it, see ``BodyFile/claim(_:)``). The engine tells the
/// transport the file (``APITransportOptions/bodyFile``), so that it can upload it natively.
final class BodyFile: Sendable {
    let url: URL
    let isTemporary: Bool
    /// A form too large for memory that is not written anywhere: the engine gives it to a transport
    /// that accepts body writers (``APITransport/acceptsBodyWriters``). `url` is then unused.
    let deferredWriter: APIRequestBody.Writer?

    init(url: URL, isTemporary: Bool) {
        self.url = url
        self.isTemporary = isTemporary
        deferredWriter = nil
    }

    init(deferring form: APIRequestBody.Writer) {
        url = Self.newTemporaryURL()
        isTemporary = false
        deferredWriter = form
    }

    /// Set while the engine builds a request for a transport that accepts body writers: a form too
    /// large for memory is then not written to a temporary file.
    static var defersForms: Bool { defersFormsFlag.isSet }

    /// Set on the building thread (building is synchronous, so the flag is what a task-local value
    /// would be, without its allocation).
    static let defersFormsFlag = ThreadFlag()

    deinit { if isTemporary { try? FileManager.default.removeItem(at: url) } }

    /// The prefix of a spooled form's temporary file: `APIManagerKit-body-PID-UUID`.
    static let temporaryPrefix = "APIManagerKit-body"

    /// A new temporary file's URL; the first of a process sweeps the files killed processes left.
    static func newTemporaryURL() -> URL {
        _ = sweptOnce
        return OwnerOnlyFile.temporaryURL(prefix: temporaryPrefix)
    }

    /// The sweep of leftovers, once per process, at the first use.
    private static let sweptOnce: Int = OwnerOnlyFile.sweepTemporaryFiles(prefix: temporaryPrefix)

    // MARK: Who owns which

    /// The body files of built requests not yet claimed by an attempt, by their stream. A stream
    /// that is gone (a request built and dropped) gives its file up at the next registration.
    private struct Entry {
        weak var stream: InputStream?
        let body: BodyFile
    }

    /// @unchecked: the entries are only touched under the lock; a weak `InputStream` is only compared.
    private struct Registry: @unchecked Sendable {
        var entries: [ObjectIdentifier: Entry] = [:]
    }

    private static let registry = LockedState(Registry())

    static func register(_ body: BodyFile, for stream: InputStream) {
        registry.withLock { registry in
            registry.entries = registry.entries.filter { $0.value.stream != nil }
            registry.entries[ObjectIdentifier(stream)] = Entry(stream: stream, body: body)
        }
    }

    /// The body file of `stream`, now owned by the caller (`nil` for a stream that is not one).
    static func claim(_ stream: InputStream?) -> BodyFile? {
        guard let stream else { return nil }
        return registry.withLock { registry in
            guard let entry = registry.entries[ObjectIdentifier(stream)], entry.stream === stream else { return nil }
            registry.entries[ObjectIdentifier(stream)] = nil
            return entry.body
        }
    }

    /// The body file of `stream` while no attempt has claimed it, left where it is (cURL descriptions).
    static func registered(for stream: InputStream) -> BodyFile? {
        registry.withLock { registry in
            registry.entries[ObjectIdentifier(stream)].flatMap { $0.stream === stream ? $0.body : nil }
        }
    }

    /// The number of body files not yet claimed (tests).
    static var unclaimedCount: Int { registry.withLock { $0.entries.values.filter { $0.stream != nil }.count } }
}
