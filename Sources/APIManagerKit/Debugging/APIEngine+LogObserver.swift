import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// An observer that writes a log: one line per attempt (`.info`, or `.warning` when it failed or
    /// the server answered `4xx`/`5xx`), a line for each other step of a task at `.debug`, and, when
    /// asked, the first bytes of each body, every secret redacted by the one rule of ``APISecrets``
    /// (URLs, form and JSON bodies; the request's credential headers are never written).
    ///
    /// ```swift
    /// var configuration = APIEngine.Configuration()
    /// configuration.observers = [APIEngine.LogObserver(minimumLevel: .debug, bodyBytes: 512)]
    /// // [info] ← 200 GET https://api.example.com/items?token=*** in 42.1 ms, 1832 bytes (task 7, attempt 1, waitUntilDone, scope "cart")
    /// ```
    ///
    /// `write` receives each line with its level (printed unless given); it is called on the thread
    /// the observation is made on (see ``Observer``), so it must be thread-safe. For swift-log, use
    /// `Integrations/Observability`, which writes the same facts as structured metadata.
    public struct LogObserver: Observer {
        /// How much a line matters.
        public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
            /// Each step of a task: sent, waiting, started, retried, ended; the bodies.
            case debug
            /// Each attempt the server answered with a status below 400.
            case info
            /// Each attempt that failed or was answered with `4xx`/`5xx`, and each task that failed
            /// for another reason than a cancellation or an ignoring policy.
            case warning

            public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

            public var description: String {
                switch self {
                case .debug: return "debug"
                case .info: return "info"
                case .warning: return "warning"
                }
            }
        }

        /// The least level written: `.info` unless given.
        public let minimumLevel: Level
        /// How many bytes of each request and response body are written, at `.debug`: 0 (none)
        /// unless given.
        public let bodyBytes: Int
        private let write: @Sendable (Level, String) -> Void

        /// - Parameters:
        ///   - minimumLevel: `.info` unless given.
        ///   - bodyBytes: 0 (no body) unless given.
        ///   - write: where the lines go; printed as `[level] line` unless given.
        public init(
            minimumLevel: Level = .info, bodyBytes: Int = 0,
            write: @escaping @Sendable (Level, String) -> Void = { level, line in print("[\(level)] \(line)") }
        ) {
            self.minimumLevel = minimumLevel
            self.bodyBytes = max(0, bodyBytes)
            self.write = write
        }

        public func observe(_ observation: APIEngine.Observation) {
            // Above `.debug`, only an attempt's end and a task's failure can make a line: the others
            // are not even formatted.
            if minimumLevel > .debug {
                switch observation.kind {
                case .attemptEnded, .ended(.failure): break
                default: return
                }
            }
            for (level, line) in Self.lines(for: observation, bodyBytes: bodyBytes) where level >= minimumLevel {
                write(level, line)
            }
        }

        /// Writes the notice: a circuit closed again at `info`, the others at `warning`.
        public func notice(_ notice: APIEngine.Notice) {
            let level: Level = notice.kind == .circuitClosed ? .info : .warning
            if minimumLevel <= level { write(level, "\(notice)") }
        }

        /// The lines an observation makes, with their levels.
        static func lines(for observation: APIEngine.Observation, bodyBytes: Int) -> [(Level, String)] {
            let task = observation.task
            let about = "task \(task.identifier)"
            switch observation.kind {
            case .sent:
                return [(.debug, "→ \(about) sent (\(describe(task)))")]
            case .waiting(let ahead):
                return [(.debug, "… \(about) waits" + (ahead.map { ", \($0) ahead in its line" } ?? ""))]
            case .waitingForNetwork:
                return [(.debug, "… \(about) waits for the network")]
            case .started(let attempt):
                return [(.debug, "▷ \(about) begins attempt \(attempt)")]
            case .attemptSent(let attempt, let request, let sharedWith):
                var lines: [(Level, String)] = []
                if let sharedWith {
                    lines.append((.debug, "⇢ \(about) attempt \(attempt) joined task \(sharedWith)'s request"))
                }
                if bodyBytes > 0, let body = request.httpBody, !body.isEmpty {
                    lines.append(
                        (
                            .debug,
                            "  request body of \(about): "
                                + dump(
                                    body, contentType: request.value(forHTTPHeaderField: "Content-Type"),
                                    secretNames: observation.secretNames, limit: bodyBytes)
                        ))
                }
                return lines
            case .attemptEnded(let report):
                return attemptLines(report, of: task, bodyBytes: bodyBytes)
            case .renewingCredential(let attempt):
                return [(.debug, "⟳ \(about) attempt \(attempt) waits for a renewed credential")]
            case .responseBuilt(let attempt, let duration):
                return [(.debug, "◇ \(about) attempt \(attempt) response built in \(milliseconds(duration))")]
            case .cachedCopy:
                return [(.debug, "◇ \(about) given a stored copy")]
            case .retryScheduled(let delay, let error):
                return [
                    (.debug, "↻ \(about) retries in \(String(format: "%.3f", delay)) s after \(summary(of: error))")
                ]
            case .ended(.success(let source)):
                return [(.debug, "■ \(about) finished (\(source))")]
            case .ended(.failure(let error)):
                let routine: Bool
                switch error {
                case .cancelled, .ignored: routine = true
                default: routine = false
                }
                return [(routine ? .debug : .warning, "■ \(about) failed: \(summary(of: error)) (\(describe(task)))")]
            }
        }

        private static func attemptLines(
            _ report: APIEngine.AttemptReport, of task: AnyAPITask, bodyBytes: Int
        ) -> [(Level, String)] {
            let suffix = "(task \(task.identifier), attempt \(report.attempt), \(describe(task)))"
            let time = milliseconds(report.transportDuration)
            switch report.result {
            case .success(let response):
                let level: Level = response.statusCode >= 400 ? .warning : .info
                let mark = response.statusCode >= 400 ? "✕" : "←"
                var lines: [(Level, String)] = [
                    (
                        level,
                        "\(mark) \(response.statusCode) \(report.method) \(report.redactedURL) in \(time), "
                            + "\(response.body.count) bytes \(suffix)"
                    )
                ]
                if bodyBytes > 0, !response.body.isEmpty {
                    lines.append(
                        (
                            .debug,
                            "  response body of task \(task.identifier): "
                                + dump(
                                    response.body, contentType: response.value(forHeader: "Content-Type"),
                                    secretNames: report.sensitiveHeaders, limit: bodyBytes)
                        ))
                }
                return lines
            case .failure(let error):
                return [
                    (.warning, "✕ \(report.method) \(report.redactedURL) in \(time): \(summary(of: error)) \(suffix)")
                ]
            }
        }

        /// What went wrong, without anything a server or an underlying error wrote (a server's
        /// message, an error's description may carry a URL or a token): the kind, and the status,
        /// code or limit that tells it.
        static func summary(of error: APIError) -> String {
            switch error {
            case .cancelled(let reason): return "cancelled (\(reason))"
            case .ignored: return "ignored"
            case .timedOut(let deadline, let attempts): return "timed out after \(deadline) s (\(attempts) attempts)"
            case .transport(let error as URLError): return "transport error (URLError \(error.code.rawValue))"
            case .transport: return "transport error"
            case .invalidRequest: return "invalid request"
            case .unacceptableStatus(let response, _): return "status \(response.statusCode)"
            case .decoding(_, let response): return "decoding failed (status \(response.statusCode))"
            case .rejected(_, let response): return "rejected (status \(response.statusCode))"
            case .responseTooLarge(let limit): return "response larger than \(limit) bytes"
            case .authenticationFailed: return "authentication failed"
            case .lineFull(let maxLength): return "line full (\(maxLength))"
            case .waitedTooLong(let maxWait): return "waited too long (\(maxWait) s)"
            case .circuitOpen(let origin, _): return "circuit of \(origin) open"
            case .durableStore: return "not kept on disk"
            }
        }

        /// The task's policy and scope, as a log line's context.
        static func describe(_ task: AnyAPITask) -> String {
            let scope = task.concurrencyScope.map { "scope \"\($0)\"" } ?? "no scope"
            return "\(task.concurrencyPolicy.rawValue), \(scope)"
        }

        /// The first `limit` bytes of a body as text, its secrets redacted first (so a cut never
        /// splits a secret from its name).
        static func dump(_ body: Data, contentType: String?, secretNames: Set<String>, limit: Int) -> String {
            guard let text = String(data: body, encoding: .utf8) else { return "(\(body.count) bytes, not text)" }
            let redacted = APISecrets.redactedBody(
                text, data: body, contentType: contentType, additionalNames: secretNames)
            let shown = String(decoding: Array(redacted.utf8.prefix(limit)), as: UTF8.self)
            let cut = redacted.utf8.count > limit ? " … (\(body.count) bytes)" : ""
            return shown.replacingOccurrences(of: "\n", with: "\\n") + cut
        }

        private static func milliseconds(_ seconds: TimeInterval) -> String {
            String(format: "%.1f ms", seconds * 1000)
        }
    }
}
