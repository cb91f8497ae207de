import Foundation

/// A request body: bytes and the media type that describes them; or a file streamed from disk; or
/// a `multipart/form-data` form, written when the request is built; or a stream opened for every
/// attempt.
public struct APIRequestBody: Sendable, Hashable {
    /// The encoded bytes (empty for a file or a form).
    public var data: Data
    /// Sent as `Content-Type` unless the request's headers already name one.
    public var contentType: String?
    /// A file sent as the body in place of ``data``, streamed from disk (never read whole into
    /// memory) with its size as `Content-Length`, and read afresh on every attempt (a retry or a
    /// replay after a refreshed credential sends it from the start). `nil` unless made by
    /// ``file(_:contentType:)``.
    public var fileURL: URL?
    /// A form written when the request is built (see ``multipart(_:inMemoryLimit:)``).
    var form: Form?
    /// A stream opened for every attempt (see ``stream(length:contentType:_:)``).
    var source: StreamSource?

    struct Form: Sendable, Hashable {
        var form: APIMultipartFormData
        var inMemoryLimit: Int
    }

    /// A body of `data`, sent with `contentType` as its `Content-Type` unless the request sets one.
    public init(data: Data, contentType: String? = nil) {
        self.data = data
        self.contentType = contentType
    }

    /// A body encoded as JSON with the given encoder, `Content-Type: application/json`.
    public static func json<Value: Encodable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) throws(APIError)
        -> APIRequestBody
    {
        do {
            return APIRequestBody(data: try encoder.encode(value), contentType: "application/json")
        } catch {
            throw .invalidRequest(reason: "the body could not be encoded as JSON", underlying: error)
        }
    }

    /// The file at `url`, streamed from disk. Its `Content-Type` is `contentType`, else the one of
    /// its extension (see ``APIFile/mimeType(forExtension:)``), else `application/octet-stream`. A
    /// file that cannot be read fails the attempt with ``APIError/invalidRequest(reason:underlying:)``.
    public static func file(_ url: URL, contentType: String? = nil) -> APIRequestBody {
        var body = APIRequestBody(
            data: Data(),
            contentType: contentType ?? APIFile.mimeType(forExtension: APIFile.pathExtension(of: url.lastPathComponent))
                ?? "application/octet-stream")
        body.fileURL = url
        return body
    }

    /// A body read from a stream as it is sent: `makeStream` opens a new one for every attempt (a
    /// retry, or a replay after a refreshed credential, sends the body from the start), so it must
    /// give the same bytes each time. With `length` (its size in bytes) the body goes with that
    /// `Content-Length`; without it, chunked. URLSession on Linux sends every stream chunked (it
    /// cannot send a stream with a length), AsyncHTTPClientTransport with its `Content-Length`. A
    /// stream that cannot be opened fails the attempt with ``APIError/invalidRequest(reason:underlying:)``.
    /// Its `Content-Type` is `contentType` unless the request sets one; `application/octet-stream`
    /// unless given. For a file, ``file(_:contentType:)`` is better: it is sent natively.
    ///
    /// ```swift
    /// var body: APIRequestBody? {
    ///     .stream(length: export.size) { try export.makeInputStream() }
    /// }
    /// ```
    public static func stream(
        length: Int64? = nil, contentType: String? = nil, _ makeStream: @escaping @Sendable () throws -> InputStream
    ) -> APIRequestBody {
        var body = APIRequestBody(data: Data(), contentType: contentType ?? "application/octet-stream")
        body.source = StreamSource(length: length, make: makeStream)
        return body
    }

    /// Where a stream body comes from: equal only to itself.
    final class StreamSource: Sendable, Hashable {
        let length: Int64?
        let make: @Sendable () throws -> InputStream

        init(length: Int64?, make: @escaping @Sendable () throws -> InputStream) {
            self.length = length
            self.make = make
        }

        static func == (lhs: StreamSource, rhs: StreamSource) -> Bool { lhs === rhs }
        func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    }

    /// A `multipart/form-data` body. Written when the request is built, on every attempt: in memory
    /// when its size is at most `inMemoryLimit` bytes (10 MiB unless given), else to a temporary
    /// file that is streamed from disk and removed when the attempt ends, so that memory stays
    /// bounded whatever the files' sizes.
    public static func multipart(
        _ form: APIMultipartFormData, inMemoryLimit: Int = APIRequestDefaults.multipartInMemoryLimit
    ) -> APIRequestBody {
        var body = APIRequestBody(data: Data(), contentType: form.contentType)
        body.form = Form(form: form, inMemoryLimit: inMemoryLimit)
        return body
    }
}
