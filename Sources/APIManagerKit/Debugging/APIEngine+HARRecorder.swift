import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// An observer that records every attempt an engine sends as an HTTP Archive (HAR 1.2), to
    /// show a colleague what the app sent (browsers, Charles and Proxyman open it) or to replay in
    /// a test (`MockTransport.replay(_:timing:)`).
    ///
    /// ```swift
    /// let recorder = APIEngine.HARRecorder()
    /// var configuration = APIEngine.Configuration()
    /// configuration.observers = [recorder]
    /// let engine = APIEngine(configuration: configuration)
    /// // … use the engine …
    /// try recorder.write(to: applicationSupport.appendingPathComponent("session.har"))
    /// ```
    ///
    /// - **Every attempt** is an entry (a retry's, one sent again after a renewed credential), in the
    ///   order the attempts ended; an answer from the cache or a request that joined an identical
    ///   one in flight is no exchange and is not recorded. A transport failure is an entry with
    ///   status 0 and its `_error`.
    /// - **Secrets are redacted** by the one rule (``APISecrets``, with the request's own secret
    ///   names): header values, query items, the user and password of a URL, and the keys of form
    ///   and JSON bodies, in requests and responses alike, are `***`.
    /// - **Bodies** up to ``bodyLimit`` bytes (64 KiB unless set) are kept, as text or base64; a
    ///   larger one, a file or stream upload and a download's or a stream's body are noted by size.
    /// - **Timings**: sent, the response's head (when the transport tells it), ended; the DNS,
    ///   connect and TLS phases where the transport measured them.
    /// - ``write(to:)`` writes the file only its owner may read (`0600`), and whole: a new file
    ///   renamed over the target, so a reader sees the previous file or the complete new one.
    /// - At most ``maxEntries`` (10,000 unless set) are kept; past them the oldest go, and the log's
    ///   comment says how many.
    ///
    /// Not installed, it costs nothing; installed, each attempt's end costs the entry's making, on
    /// the attempt's thread, under the recorder's own lock.
    public final class HARRecorder: Observer, @unchecked Sendable {
        // @unchecked: `state` is behind its lock; the settings are constants.
        /// The largest body kept, in bytes. 64 KiB unless given.
        public let bodyLimit: Int
        /// The most entries kept; the oldest go first. 10,000 unless given.
        public let maxEntries: Int
        private let state = LockedState(State())

        private struct State {
            var entries: [HAR.Entry] = []
            var dropped = 0
            /// The attempts that joined another task's identical request in flight, until they end:
            /// theirs is no exchange of its own.
            var joined: Set<AttemptKey> = []
        }

        private struct AttemptKey: Hashable {
            let task: UInt64
            let attempt: Int
        }

        /// A recorder that keeps bodies up to `bodyLimit` bytes and at most `maxEntries` entries.
        public init(bodyLimit: Int = 64 << 10, maxEntries: Int = 10_000) {
            self.bodyLimit = max(0, bodyLimit)
            self.maxEntries = max(1, maxEntries)
        }

        /// What was recorded so far, as an archive.
        public var har: HAR {
            let (entries, dropped) = state.withLock { ($0.entries, $0.dropped) }
            return HAR(
                entries: entries,
                comment: dropped == 0 ? nil : "\(dropped) older entries were dropped past the limit of \(maxEntries)")
        }

        /// The entries recorded so far.
        public var entries: [HAR.Entry] { state.withLock { $0.entries } }

        /// Forgets every entry.
        public func removeAll() {
            state.withLock {
                $0.entries.removeAll()
                $0.dropped = 0
            }
        }

        /// Writes ``har`` to `url`: a file only its owner may read, complete or absent (a new file
        /// renamed over `url`, both synchronized to the disk). Throws `CocoaError(.fileWriteUnknown)`
        /// naming the path and the system's error.
        public func write(to url: URL) throws {
            try Self.write(har, to: url)
        }

        static func write(_ har: HAR, to url: URL) throws {
            let data = try har.encoded()
            do {
                try OwnerOnlyFile.write(data, to: url, synchronized: true)
            } catch {
                throw CocoaError(
                    .fileWriteUnknown,
                    userInfo: [
                        NSFilePathErrorKey: error.path,
                        NSUnderlyingErrorKey: POSIXError(POSIXErrorCode(rawValue: error.code) ?? .EIO),
                    ])
            }
        }

        /// Writes the entries of `earlier` followed by ``entries`` (a replay's new episodes after
        /// the recording it replayed), as ``write(to:)`` does.
        public func write(to url: URL, after earlier: HAR) throws {
            var merged = har
            merged.log.entries = earlier.log.entries + merged.log.entries
            try Self.write(merged, to: url)
        }

        /// Records each attempt's end.
        public func observe(_ observation: Observation) {
            let task = observation.task.identifier
            switch observation.kind {
            case .attemptSent(let attempt, _, sharedWith: .some):
                state.withLock { _ = $0.joined.insert(AttemptKey(task: task, attempt: attempt)) }
            case .attemptEnded(let report):
                let joined = state.withLock { $0.joined.remove(AttemptKey(task: task, attempt: report.attempt)) != nil }
                if !joined {
                    append(Self.entry(report, task: task, endedAt: observation.time, bodyLimit: bodyLimit))
                }
            default:
                break
            }
        }

        /// Records an exchange made outside an engine's observation (a transport of a test that sends
        /// what a replay lacks, `MockTransport.replay(_:timing:sendingMissesWith:into:)`), redacted by
        /// the standard rule of ``APISecrets``: `request` as sent, its `result`, sent at `sent` and
        /// answered `duration` seconds later.
        public func record(
            _ request: URLRequest, result: Result<APIRawResponse, any Error>, sent: Date, duration: TimeInterval
        ) {
            let time = Self.milliseconds(duration)
            let request = Self.request(request, version: "", secrets: [], bodyLimit: bodyLimit)
            let outcome = result.mapError { error in error as? APIError ?? .transport(underlying: error) }
            append(
                Self.entry(
                    request: request, outcome: outcome, started: sent, time: time,
                    timings: HAR.Timings(wait: time, receive: 0), version: "", secrets: [], bodyLimit: bodyLimit))
        }

        private func append(_ entry: HAR.Entry) {
            state.withLock { state in
                state.entries.append(entry)
                if state.entries.count > maxEntries {
                    state.entries.removeFirst(state.entries.count - maxEntries)
                    state.dropped += 1
                }
            }
        }

        // MARK: Making an entry

        static func entry(_ report: AttemptReport, task: UInt64, endedAt: TimeInterval, bodyLimit: Int) -> HAR.Entry {
            let secrets = report.sensitiveHeaders
            let head = report.headReceived ?? report.answered
            let version = report.protocolVersion.map { "HTTP/\($0)" } ?? ""
            var timings = HAR.Timings(
                wait: milliseconds(head - report.sent), receive: milliseconds(report.answered - head))
            if let phases = report.phases {
                timings.dns = phases.domainLookup.map(milliseconds) ?? -1
                timings.connect = phases.connect.map(milliseconds) ?? -1
                timings.ssl = phases.secureConnection.map(milliseconds) ?? -1
            }
            var entry = self.entry(
                request: request(report.request, version: version, secrets: secrets, bodyLimit: bodyLimit),
                outcome: report.result, started: Date(timeIntervalSinceNow: report.sent - endedAt),
                time: milliseconds(report.answered - report.sent), timings: timings, version: version, secrets: secrets,
                bodyLimit: bodyLimit)
            entry.task = task
            entry.attempt = report.attempt
            return entry
        }

        /// An entry of `request` and its `outcome`: the response, or the failure and its `URLError` code.
        static func entry(
            request: HAR.Request, outcome: Result<APIRawResponse, APIError>, started: Date, time: Double,
            timings: HAR.Timings, version: String, secrets: Set<String>, bodyLimit: Int
        ) -> HAR.Entry {
            var entry = HAR.Entry(
                startedDateTime: started.ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
                time: time, request: request,
                response: HAR.Response(status: 0, content: HAR.Content(size: 0, mimeType: "")), timings: timings)
            switch outcome {
            case .success(let raw):
                entry.response = response(raw, version: version, secrets: secrets, bodyLimit: bodyLimit)
            case .failure(let error):
                entry.error = error.localizedDescription
                entry.errorCode = (error.underlyingError as? URLError)?.code.rawValue
            }
            return entry
        }

        /// Seconds as HAR's milliseconds, to the microsecond, never negative.
        static func milliseconds(_ seconds: TimeInterval) -> Double { max(0, (seconds * 1_000_000).rounded() / 1000) }

        static func request(_ request: URLRequest, version: String, secrets: Set<String>, bodyLimit: Int) -> HAR.Request
        {
            let url = request.url.map { APISecrets.redacted($0, additionalNames: secrets) } ?? ""
            let query =
                URLComponents(string: url)?.queryItems?.map { HAR.Field(name: $0.name, value: $0.value ?? "") } ?? []
            let headers = fields(request.allHTTPHeaderFields ?? [:], secrets: secrets)
            let contentType = request.value(forHTTPHeaderField: "Content-Type") ?? ""
            var har = HAR.Request(
                method: request.httpMethod ?? "GET", url: url, httpVersion: version, headers: headers,
                queryString: query)
            if let body = request.httpBody {
                har.bodySize = body.count
                har.postData = postData(body, contentType: contentType, secrets: secrets, bodyLimit: bodyLimit)
            } else if request.httpBodyStream != nil {
                let length = request.value(forHTTPHeaderField: "Content-Length").flatMap(Int.init)
                har.bodySize = length ?? -1
                har.postData = HAR.PostData(
                    mimeType: contentType, text: "",
                    comment: "a file or stream body of \(length.map { "\($0) bytes" } ?? "unknown length"), not kept")
            }
            return har
        }

        static func response(_ raw: APIRawResponse, version: String, secrets: Set<String>, bodyLimit: Int)
            -> HAR.Response
        {
            let contentType = raw.value(forHeader: "Content-Type") ?? ""
            var content: HAR.Content
            if let file = raw.fileURL {
                let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? nil
                content = HAR.Content(
                    size: size ?? raw.body.count, mimeType: contentType,
                    comment: "written to the file \(file.lastPathComponent), not kept")
            } else {
                content = HAR.Content(size: raw.body.count, mimeType: contentType)
                let kept = body(raw.body, contentType: contentType, secrets: secrets, bodyLimit: bodyLimit)
                content.text = kept.text
                content.encoding = kept.encoding
                content.comment = kept.comment
            }
            return HAR.Response(
                status: raw.statusCode, httpVersion: version, headers: fields(raw.headers, secrets: secrets),
                content: content, redirectURL: raw.value(forHeader: "Location") ?? "")
        }

        static func postData(_ body: Data, contentType: String, secrets: Set<String>, bodyLimit: Int) -> HAR.PostData {
            let kept = self.body(body, contentType: contentType, secrets: secrets, bodyLimit: bodyLimit)
            return HAR.PostData(
                mimeType: contentType, text: kept.text ?? "", encoding: kept.encoding, comment: kept.comment)
        }

        /// A body as HAR keeps it: redacted text, base64 for bytes that are not UTF-8, or a note
        /// past the limit.
        static func body(_ data: Data, contentType: String, secrets: Set<String>, bodyLimit: Int)
            -> (text: String?, encoding: String?, comment: String?)
        {
            guard data.count <= bodyLimit else {
                return (nil, nil, "a body of \(data.count) bytes, over the recorder's limit of \(bodyLimit), not kept")
            }
            guard let text = String(data: data, encoding: .utf8) else {
                return (data.base64EncodedString(), "base64", nil)
            }
            if contentType.lowercased().contains("multipart/form-data"),
                let redacted = APISecrets.redactedMultipart(data, contentType: contentType, additionalNames: secrets)
            {
                return (String(decoding: redacted, as: UTF8.self), nil, nil)
            }
            let redacted = APISecrets.redactedBody(
                text, data: data, contentType: contentType.isEmpty ? nil : contentType, additionalNames: secrets)
            return (redacted, nil, nil)
        }

        static func fields(_ headers: [String: String], secrets: Set<String>) -> [HAR.Field] {
            headers.sorted { $0.key.lowercased() < $1.key.lowercased() }.map { name, value in
                HAR.Field(
                    name: name, value: APISecrets.isSecret(name, additionalNames: secrets) ? APISecrets.mask : value)
            }
        }
    }
}
