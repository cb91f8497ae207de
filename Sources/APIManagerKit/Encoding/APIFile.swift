import Foundation

/// A file to upload as a part of a `multipart/form-data` body (RFC 7578): bytes in memory or a file
/// on disk, with the file name and MIME type the part announces.
///
/// Give it as a parameter value (``APIValue/file(_:)``) and the request's body becomes multipart on
/// its own; or append it to an ``APIMultipartFormData``.
///
/// ```swift
/// var parameters: APIParameters {
///     ["caption": "Sunset", "photo": .file(APIFile(url: photoURL))]
/// }
/// ```
public struct APIFile: Sendable, Hashable {
    /// Where the bytes are.
    public enum Content: Sendable, Hashable {
        /// Bytes in memory.
        case data(Data)
        /// A file on disk, read in chunks when the body is written (never whole into memory).
        case file(URL)
    }

    /// The bytes to send.
    public var content: Content
    /// The part's `filename`. For a file on disk, its last path component unless given; for bytes in
    /// memory, none unless given.
    public var fileName: String?
    /// The part's `Content-Type`. Unless given: from the file name's extension, else from the first
    /// bytes (PNG, JPEG, GIF, WebP, PDF, ZIP, gzip, MP4), else `application/octet-stream`.
    public var mimeType: String?

    /// Bytes in memory.
    public init(data: Data, fileName: String? = nil, mimeType: String? = nil) {
        self.content = .data(data)
        self.fileName = fileName
        self.mimeType = mimeType
    }

    /// A file on disk; `fileName` is its last path component unless given.
    public init(url: URL, fileName: String? = nil, mimeType: String? = nil) {
        self.content = .file(url)
        self.fileName = fileName ?? url.lastPathComponent
        self.mimeType = mimeType
    }

    /// The MIME type the part announces (see ``mimeType``).
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when a file must be sniffed and
    ///   cannot be read.
    public func resolvedMIMEType() throws(APIError) -> String {
        if let mimeType { return mimeType }
        if let fileName, let type = Self.mimeType(forExtension: Self.pathExtension(of: fileName)) {
            return type
        }
        let head: Data
        switch content {
        case .data(let data): head = data.prefix(16)
        case .file(let url): head = try FileSource.head(of: url, count: 16)
        }
        return Self.sniffedMIMEType(of: head) ?? "application/octet-stream"
    }

    /// The byte count of the content.
    ///
    /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when the file cannot be read.
    public func byteCount() throws(APIError) -> Int64 {
        switch content {
        case .data(let data): return Int64(data.count)
        case .file(let url): return try FileSource.size(of: url)
        }
    }

    // MARK: MIME types

    /// The extension of a file name: after the last dot of its last path component, unless that dot
    /// starts it. (Foundation's `pathExtension` on Linux crashes on some names, found by fuzzing.)
    static func pathExtension(of fileName: String) -> String {
        let last = fileName.split(separator: "/", omittingEmptySubsequences: true).last ?? ""
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return "" }
        return String(last[last.index(after: dot)...])
    }

    /// The MIME type of a file extension (case-insensitive), for the common types; `nil` for others.
    public static func mimeType(forExtension pathExtension: String) -> String? {
        extensions[pathExtension.lowercased()]
    }

    private static let extensions: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "svg": "image/svg+xml", "bmp": "image/bmp",
        "tif": "image/tiff", "tiff": "image/tiff", "ico": "image/vnd.microsoft.icon",
        "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime", "webm": "video/webm",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg",
        "flac": "audio/flac",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
        "json": "application/json", "xml": "application/xml", "csv": "text/csv", "txt": "text/plain",
        "md": "text/markdown", "html": "text/html", "htm": "text/html", "css": "text/css",
        "js": "text/javascript", "ndjson": "application/x-ndjson", "jsonl": "application/jsonl",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel", "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "bin": "application/octet-stream",
    ]

    /// The MIME type that the first bytes of a file announce (magic numbers), for the common binary
    /// formats; `nil` when none matches.
    public static func sniffedMIMEType(of head: Data) -> String? {
        let bytes = [UInt8](head.prefix(16))
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<offset + prefix.count]) == prefix
        }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if starts(Array("RIFF".utf8)), starts(Array("WEBP".utf8), at: 8) { return "image/webp" }
        if starts(Array("%PDF-".utf8)) { return "application/pdf" }
        if starts([0x50, 0x4B, 0x03, 0x04]) { return "application/zip" }
        if starts([0x1F, 0x8B]) { return "application/gzip" }
        if starts(Array("ftyp".utf8), at: 4) { return "video/mp4" }
        return nil
    }
}

/// Reading files given as bodies or parts, with typed errors.
enum FileSource {
    static func size(of url: URL) throws(APIError) -> Int64 {
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            guard (attributes[.type] as? FileAttributeType) != .typeDirectory else {
                throw CocoaError(.fileReadUnknown)
            }
            return (attributes[.size] as? NSNumber)?.int64Value ?? 0
        } catch {
            throw unreadable(url, error)
        }
    }

    static func head(of url: URL, count: Int) throws(APIError) -> Data {
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            return try handle.read(upToCount: count) ?? Data()
        } catch {
            throw unreadable(url, error)
        }
    }

    static func unreadable(_ url: URL, _ error: any Error) -> APIError {
        .invalidRequest(reason: "the file \(url.lastPathComponent) cannot be read for the body", underlying: error)
    }
}
