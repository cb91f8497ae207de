import Foundation

/// One task of a durable line as it lies on disk (see ``APIEngine/DurableStore``): its place in the
/// line, its idempotency key, the type its request was written as, and the request itself, encoded.
///
/// The bytes, big-endian, each length before its field:
///
/// | field | bytes |
/// |---|---|
/// | magic `APIMKDL1` (the format's version is its last character) | 8 |
/// | sequence | 8 |
/// | idempotency key: `0` for none, else `1` and a 4-byte length and UTF-8 | 1 + 4 + n |
/// | request type: 4-byte length, UTF-8 | 4 + n |
/// | request: 8-byte length, the request's JSON | 8 + n |
/// | SHA-256 of every byte before it | 32 |
///
/// A record that does not read back whole (too short, too long, another magic, a checksum that does
/// not match) is refused with a ``ReadError``, never half read.
struct DurableRecord: Equatable, Sendable {
    /// Its place in its scope's line: the line replays in increasing order.
    var sequence: UInt64
    /// The value of the task's idempotency header, sent again on replay; `nil` when it has none.
    var idempotencyKey: String?
    /// The request's type as the writer named it (`String(reflecting:)`), for the error when it can
    /// no longer be decoded.
    var requestType: String
    /// The request, as its `Encodable` conformance wrote it in JSON.
    var request: Data

    static let magic = Array("APIMKDL1".utf8)
    static let checksumLength = 32

    /// Why the bytes of a record could not be read back.
    enum ReadError: Error, Equatable, CustomStringConvertible {
        /// Fewer bytes than its fields say: a record cut short (a write the file system lost).
        case truncated
        /// Not a record of this format (or of a later version of it).
        case notARecord
        /// Its bytes are not the ones written: the checksum does not match.
        case checksumMismatch
        /// Bytes after the checksum, or a name that is not UTF-8.
        case malformed

        var description: String {
            switch self {
            case .truncated: return "the record is cut short"
            case .notARecord: return "the file is not a durable record of this format"
            case .checksumMismatch: return "the record's checksum does not match its bytes"
            case .malformed: return "the record is malformed"
            }
        }
    }

    /// The record's bytes, checksum included.
    var bytes: Data {
        var bytes = Data()
        bytes.reserveCapacity(Self.magic.count + 8 + 1 + 4 + 4 + 8 + request.count + 64 + Self.checksumLength)
        bytes.append(contentsOf: Self.magic)
        Self.append(sequence, bytes: 8, to: &bytes)
        if let idempotencyKey {
            bytes.append(1)
            let key = Array(idempotencyKey.utf8)
            Self.append(UInt64(key.count), bytes: 4, to: &bytes)
            bytes.append(contentsOf: key)
        } else {
            bytes.append(0)
        }
        let type = Array(requestType.utf8)
        Self.append(UInt64(type.count), bytes: 4, to: &bytes)
        bytes.append(contentsOf: type)
        Self.append(UInt64(request.count), bytes: 8, to: &bytes)
        bytes.append(request)
        var hash = SHA256()
        hash.update(bytes)
        bytes.append(contentsOf: hash.finalize())
        return bytes
    }

    /// Reads a record back from `bytes`, whole or not at all.
    init(bytes: Data) throws(ReadError) {
        var reader = Reader(bytes: [UInt8](bytes))
        guard try reader.take(Self.magic.count).elementsEqual(Self.magic) else { throw .notARecord }
        sequence = try reader.integer(bytes: 8)
        switch try reader.take(1).first {
        case 0?: idempotencyKey = nil
        case 1?: idempotencyKey = try reader.string(lengthBytes: 4)
        default: throw .malformed
        }
        requestType = try reader.string(lengthBytes: 4)
        let length = try reader.integer(bytes: 8)
        guard length <= UInt64(reader.remaining) else { throw .truncated }
        request = Data(try reader.take(Int(length)))
        let end = reader.offset
        let checksum = try reader.take(Self.checksumLength)
        guard reader.remaining == 0 else { throw .malformed }
        var hash = SHA256()
        hash.update(reader.bytes[..<end])
        guard hash.finalize().elementsEqual(checksum) else { throw .checksumMismatch }
    }

    init(sequence: UInt64, idempotencyKey: String?, requestType: String, request: Data) {
        self.sequence = sequence
        self.idempotencyKey = idempotencyKey
        self.requestType = requestType
        self.request = request
    }

    private static func append(_ value: UInt64, bytes count: Int, to data: inout Data) {
        for index in (0..<count).reversed() { data.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }

    /// Reads fields off the front of a record's bytes, refusing to read past their end.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var remaining: Int { bytes.count - offset }

        mutating func take(_ count: Int) throws(ReadError) -> ArraySlice<UInt8> {
            guard count >= 0, count <= remaining else { throw .truncated }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }

        mutating func integer(bytes count: Int) throws(ReadError) -> UInt64 {
            try take(count).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func string(lengthBytes: Int) throws(ReadError) -> String {
            let length = try integer(bytes: lengthBytes)
            guard length <= UInt64(remaining) else { throw .truncated }
            guard let string = String(bytes: try take(Int(length)), encoding: .utf8) else { throw .malformed }
            return string
        }
    }
}
