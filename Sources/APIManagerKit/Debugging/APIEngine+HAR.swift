import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// An HTTP Archive (HAR 1.2, the format browsers' developer tools, Charles and Proxyman read and
    /// write): what ``HARRecorder`` records, and what `MockTransport.replay(_:timing:)` (in
    /// APIManagerKitTesting) answers from. Read one with ``read(from:)``; the fields are HAR's own,
    /// with the engine's extras prefixed `_` as the format allows.
    public struct HAR: Codable, Sendable, Hashable {
        /// The archive.
        public var log: Log

        /// An archive of `entries`, made by APIManagerKit.
        public init(entries: [Entry] = [], comment: String? = nil) {
            self.log = Log(
                version: "1.2",
                creator: Creator(name: "APIManagerKit", version: APIEngine.DefaultHeaders.packageVersion),
                entries: entries, comment: comment)
        }

        /// The archive in the file at `url` (any HAR 1.2 file: a browser's, a proxy's, ours).
        public static func read(from url: URL) throws -> HAR {
            try JSONDecoder().decode(HAR.self, from: Data(contentsOf: url))
        }

        /// The archive as JSON, keys sorted.
        public func encoded() throws -> Data {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return try encoder.encode(self)
        }

        /// HAR's `log`.
        public struct Log: Codable, Sendable, Hashable {
            /// `1.2`.
            public var version: String
            /// What made the archive.
            public var creator: Creator
            /// Every exchange, in the order the attempts were sent.
            public var entries: [Entry]
            /// A note (how many entries were left out past the recorder's limit), or `nil`.
            public var comment: String?
        }

        /// HAR's `creator`.
        public struct Creator: Codable, Sendable, Hashable {
            /// The program's name.
            public var name: String
            /// Its version.
            public var version: String
        }

        /// One exchange: an attempt's request and its answer.
        public struct Entry: Codable, Sendable, Hashable {
            /// When the request was sent (ISO 8601 with milliseconds).
            public var startedDateTime: String
            /// Milliseconds from sending to the whole answer.
            public var time: Double
            /// The request, as sent.
            public var request: Request
            /// The answer (status 0 when the transport failed: see ``error``).
            public var response: Response
            /// HAR's `cache` (always empty: the engine's cache answers without an exchange).
            public var cache: Cache
            /// The phases, in milliseconds.
            public var timings: Timings
            /// The engine's task (`_task`), or `nil` in archives made elsewhere.
            public var task: UInt64?
            /// The attempt's number (`_attempt`), 1 for the first.
            public var attempt: Int?
            /// Why the transport failed (`_error`, as browsers write it), or `nil`.
            public var error: String?
            /// The `URLError` code the transport failed with (`_errorCode`), or `nil`.
            public var errorCode: Int?
            /// The response body as it arrived, in parts (`_chunks`: each part's size in bytes and
            /// its time from the head in milliseconds), or `nil`. A replay streams a body that has
            /// them in that many parts; ``HARRecorder`` does not write them (an observer does not
            /// see a body's parts), so they come from an archive written by hand or by another tool.
            public var chunks: [Chunk]?
            /// A note, or `nil`.
            public var comment: String?

            /// An entry; the extras are `nil` unless given.
            public init(
                startedDateTime: String, time: Double, request: Request, response: Response, timings: Timings,
                task: UInt64? = nil, attempt: Int? = nil, error: String? = nil, errorCode: Int? = nil,
                chunks: [Chunk]? = nil, comment: String? = nil
            ) {
                self.startedDateTime = startedDateTime
                self.time = time
                self.request = request
                self.response = response
                self.cache = Cache()
                self.timings = timings
                self.task = task
                self.attempt = attempt
                self.error = error
                self.errorCode = errorCode
                self.chunks = chunks
                self.comment = comment
            }

            enum CodingKeys: String, CodingKey {
                case startedDateTime, time, request, response, cache, timings, comment
                case task = "_task"
                case attempt = "_attempt"
                case error = "_error"
                case errorCode = "_errorCode"
                case chunks = "_chunks"
            }
        }

        /// A part of a response body as it arrived.
        public struct Chunk: Codable, Sendable, Hashable {
            /// Its size in bytes.
            public var size: Int
            /// Milliseconds from the response's head to this part.
            public var time: Double

            /// A part of `size` bytes, `time` milliseconds after the head.
            public init(size: Int, time: Double) {
                self.size = size
                self.time = time
            }
        }

        /// HAR's `cache`: nothing is recorded in it.
        public struct Cache: Codable, Sendable, Hashable {
            /// Empty.
            public init() {}
        }

        /// A header or a query item.
        public struct Field: Codable, Sendable, Hashable {
            /// Its name.
            public var name: String
            /// Its value (`***` for a secret, by ``APISecrets``).
            public var value: String

            /// A field.
            public init(name: String, value: String) {
                self.name = name
                self.value = value
            }
        }

        /// A request.
        public struct Request: Codable, Sendable, Hashable {
            /// Its method.
            public var method: String
            /// Its URL, secrets redacted.
            public var url: String
            /// `HTTP/1.1`, `HTTP/2` …, or empty when the transport did not say.
            public var httpVersion: String
            /// HAR's cookies (empty: the `Cookie` header is recorded, redacted).
            public var cookies: [Field]
            /// Its headers, in name order, secrets redacted.
            public var headers: [Field]
            /// Its query items, secrets redacted.
            public var queryString: [Field]
            /// Its body, or `nil` for none.
            public var postData: PostData?
            /// -1: not measured.
            public var headersSize: Int
            /// The body's size in bytes, -1 when unknown (a stream without a length).
            public var bodySize: Int

            /// A request.
            public init(
                method: String, url: String, httpVersion: String = "", headers: [Field] = [], queryString: [Field] = [],
                postData: PostData? = nil, bodySize: Int = 0
            ) {
                self.method = method
                self.url = url
                self.httpVersion = httpVersion
                self.cookies = []
                self.headers = headers
                self.queryString = queryString
                self.postData = postData
                self.headersSize = -1
                self.bodySize = bodySize
            }
        }

        /// A request body.
        public struct PostData: Codable, Sendable, Hashable {
            /// Its `Content-Type`.
            public var mimeType: String
            /// The body as text (secrets redacted), or base64 (``encoding``); empty when it was not
            /// kept (a file, a stream, past the recorder's limit: see ``comment``).
            public var text: String
            /// `base64` for a body that is not UTF-8 text (an extension of HAR 1.2 that tools read),
            /// or `nil`.
            public var encoding: String?
            /// Why the body is not in ``text``, or `nil`.
            public var comment: String?

            /// A request body.
            public init(mimeType: String, text: String, encoding: String? = nil, comment: String? = nil) {
                self.mimeType = mimeType
                self.text = text
                self.encoding = encoding
                self.comment = comment
            }
        }

        /// A response.
        public struct Response: Codable, Sendable, Hashable {
            /// Its status; 0 when the transport failed.
            public var status: Int
            /// The status's reason phrase.
            public var statusText: String
            /// `HTTP/1.1`, `HTTP/2` …, or empty when the transport did not say.
            public var httpVersion: String
            /// HAR's cookies (empty: `Set-Cookie` is recorded, redacted).
            public var cookies: [Field]
            /// Its headers, in name order, secrets redacted.
            public var headers: [Field]
            /// Its body.
            public var content: Content
            /// Its `Location`, or empty.
            public var redirectURL: String
            /// -1: not measured.
            public var headersSize: Int
            /// The body's size as it arrived, -1 when unknown.
            public var bodySize: Int

            /// A response.
            public init(
                status: Int, httpVersion: String = "", headers: [Field] = [], content: Content, redirectURL: String = ""
            ) {
                self.status = status
                self.statusText = status == 0 ? "" : HTTPURLResponse.localizedString(forStatusCode: status).capitalized
                self.httpVersion = httpVersion
                self.cookies = []
                self.headers = headers
                self.content = content
                self.redirectURL = redirectURL
                self.headersSize = -1
                self.bodySize = content.size
            }
        }

        /// A response body.
        public struct Content: Codable, Sendable, Hashable {
            /// Its size in bytes.
            public var size: Int
            /// Its `Content-Type`, or empty.
            public var mimeType: String
            /// The body as text (secrets redacted), or base64 (``encoding``), or `nil` when it was not
            /// kept (a download's file, a stream, past the recorder's limit: see ``comment``).
            public var text: String?
            /// `base64` for a body that is not UTF-8 text, or `nil`.
            public var encoding: String?
            /// Why the body is not in ``text``, or `nil`.
            public var comment: String?

            /// A response body.
            public init(
                size: Int, mimeType: String, text: String? = nil, encoding: String? = nil, comment: String? = nil
            ) {
                self.size = size
                self.mimeType = mimeType
                self.text = text
                self.encoding = encoding
                self.comment = comment
            }

            /// The bytes of ``text`` (decoded from base64 when ``encoding`` says so), or `nil`.
            public var data: Data? {
                guard let text else { return nil }
                return encoding == "base64" ? Data(base64Encoded: text) : Data(text.utf8)
            }
        }

        /// HAR's timings, in milliseconds; -1 for a phase not measured.
        public struct Timings: Codable, Sendable, Hashable {
            /// Waiting for a connection (-1).
            public var blocked: Double
            /// Looking the host up, or -1.
            public var dns: Double
            /// Connecting, or -1.
            public var connect: Double
            /// Sending the request (0 when it is counted in ``wait``).
            public var send: Double
            /// From the request sent to the response's head.
            public var wait: Double
            /// Receiving the body.
            public var receive: Double
            /// The TLS handshake, or -1.
            public var ssl: Double

            /// Timings; those not given are -1 (or 0 for `send`).
            public init(
                blocked: Double = -1, dns: Double = -1, connect: Double = -1, send: Double = 0, wait: Double,
                receive: Double, ssl: Double = -1
            ) {
                self.blocked = blocked
                self.dns = dns
                self.connect = connect
                self.send = send
                self.wait = wait
                self.receive = receive
                self.ssl = ssl
            }
        }
    }
}
