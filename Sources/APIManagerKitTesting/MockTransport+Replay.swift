import APIManagerKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension MockTransport {
    /// How a replay times its answers.
    public enum ReplayTiming: Sendable, Equatable {
        /// Each answer arrives after the time its exchange took (the entry's `time`), on the
        /// transport's clock; a body recorded in parts (`_chunks`) arrives in that many parts.
        case recorded
        /// Each answer arrives at once (inside `send`, unless a stub says otherwise).
        case immediate
    }

    /// Answers the exchanges of a recorded session (`APIEngine.HAR`: the engine's
    /// `APIEngine.HARRecorder`, a browser's or a proxy's archive): each entry becomes
    /// a stub that answers once, so a request recorded several times gets its answers in the
    /// recorded order.
    ///
    /// ```swift
    /// let transport = MockTransport(clock: clock)
    /// try transport.replay(APIEngine.HAR.read(from: recording), timing: .recorded)
    /// ```
    ///
    /// An entry matches a request with its method, scheme, host, port and path, its query items
    /// exactly (an item the recorder redacted, `***`, matches any value), and its body where one
    /// was recorded whole (JSON compared as values, a form by its fields, other bytes exactly; a
    /// body with a redacted value, or not kept, matches any). A request no entry is left for fails
    /// with ``UnmatchedRequest``, which lists what is left; ``unusedStubs`` lists the entries never
    /// asked for. An entry the transport failed (status 0) fails again, with its `URLError` code
    /// (`_errorCode`, else `.unknown`). Entries go after the stubs already made.
    public func replay(_ har: APIEngine.HAR, timing: ReplayTiming = .recorded) {
        for entry in har.log.entries {
            stub(Self.match(for: entry.request), times: 1, Self.reply(for: entry, timing: timing))
        }
    }

    /// VCR's "new episodes": replays `har` as ``replay(_:timing:)`` does, and sends a request it has
    /// no answer for with `live` (a real transport) instead of failing it, recording that exchange
    /// in `recorder` (`APIEngine.HARRecorder.record(_:result:sent:duration:)`).
    /// Write the recording and its new episodes back with
    /// `APIEngine.HARRecorder.write(to:after:)`:
    ///
    /// ```swift
    /// let recording = try APIEngine.HAR.read(from: cassette)
    /// let newEpisodes = APIEngine.HARRecorder()
    /// transport.replay(recording, timing: .immediate, sendingMissesWith: URLSessionTransport(), into: newEpisodes)
    /// // … the test …
    /// try newEpisodes.write(to: cassette, after: recording)
    /// ```
    ///
    /// A miss is sent at once whatever `timing` says, and is recorded with the standard rule of
    /// `APISecrets` (the engine's own secret names are not known here).
    public func replay(
        _ har: APIEngine.HAR, timing: ReplayTiming = .recorded, sendingMissesWith live: any APITransport,
        into recorder: APIEngine.HARRecorder
    ) {
        replay(har, timing: timing)
        sendMisses(with: live, into: recorder)
    }

    /// What a request must be to get `request`'s recorded answer.
    static func match(for request: APIEngine.HAR.Request) -> Match {
        let components = URLComponents(string: request.url)
        let items = components?.queryItems ?? []
        let mask = APISecrets.mask
        let known = Dictionary(
            items.filter { $0.value != mask }.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first }
        )
        var match = Match(
            HTTPMethod(rawValue: request.method), components?.percentEncodedPath.removingPercentEncoding,
            scheme: components?.scheme, host: components?.host, port: components?.port,
            query: items.contains { $0.value == mask } || known.count != items.count
                ? .including(known) : .exactly(known))
        if match.path?.isEmpty == true { match.path = "/" }
        if let body = request.postData, !body.text.isEmpty, body.comment == nil, !body.text.contains(mask) {
            let type = body.mimeType.lowercased()
            if body.encoding == "base64" {
                match.body = Data(base64Encoded: body.text).map(Match.Body.bytes)
            } else if type.contains("json") {
                match.body = .json(body.text)
            } else if type.contains("application/x-www-form-urlencoded") {
                let fields =
                    URLComponents(string: "?" + body.text.replacingOccurrences(of: "+", with: "%20"))?
                    .queryItems ?? []
                match.body = .form(
                    Dictionary(fields.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first }))
            } else if !type.contains("multipart/") {
                match.body = .bytes(Data(body.text.utf8))
            }
        }
        return match
    }

    /// The recorded answer of `entry`.
    static func reply(for entry: APIEngine.HAR.Entry, timing: ReplayTiming) -> Reply {
        var reply: Reply
        if entry.response.status == 0 {
            // Failable on Linux, not on Apple platforms: the optional reads the same on both.
            let code: URLError.Code? = entry.errorCode.flatMap { URLError.Code(rawValue: $0) }
            reply = .failure(code ?? .unknown)
        } else {
            var headers: [String: String] = [:]
            for field in entry.response.headers {
                headers[field.name] = headers[field.name].map { "\($0), \(field.value)" } ?? field.value
            }
            reply = .status(entry.response.status, headers: headers, body: entry.response.content.data ?? Data())
        }
        guard timing == .recorded else { return reply }
        let total = max(0, entry.time) / 1000
        // At most one part a byte: an archive cannot make a replay stage more parts than its body has.
        let parts = min(entry.chunks?.count ?? 1, max(1, entry.response.content.data?.count ?? 1))
        if parts > 1, entry.response.status != 0 {
            let head = min(total, max(0, entry.timings.wait) / 1000)
            let interval = (total - head) / Double(parts - 1)
            return reply.after(head).inChunks(parts, every: interval)
        }
        return reply.after(total)
    }
}
