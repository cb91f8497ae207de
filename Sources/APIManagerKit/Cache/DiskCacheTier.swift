import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The disk tier: one file per slot in a directory of its own (owner-only), written atomically
/// (a temporary file, then `rename`), checked on read (magic, version, lengths, key, checksum), with
/// a byte budget kept by evicting the least recently used files, and an expiry.
///
/// File layout: `AMKC` · version (1 byte) · metadata length (UInt32, big-endian) · metadata
/// (length-prefixed key fields, status, URL, date, headers, body length) · body · FNV-1a 64 of
/// everything before it (UInt64, big-endian).
///
/// Its index (slot → size, last use) is guarded by ``APIResponseCache``'s lock; reading and writing
/// files happens outside it.
struct DiskCacheTier {
    struct IndexEntry {
        var size: Int
        var lastUsed: Date
    }

    static let magic: [UInt8] = Array("AMKC".utf8)
    static let version: UInt8 = 1
    static let fileExtension = "apicache"

    let directory: URL
    let budget: Int
    let maxAge: TimeInterval
    private(set) var index: [String: IndexEntry] = [:]
    private(set) var usage = 0

    init(directory: URL, budget: Int, maxAge: TimeInterval) {
        self.directory = directory
        self.budget = max(0, budget)
        self.maxAge = maxAge
    }

    func fileURL(forSlot slot: String) -> URL {
        Self.fileURL(in: directory, slot: slot)
    }

    static func fileURL(in directory: URL, slot: String) -> URL {
        directory.appendingPathComponent(slot).appendingPathExtension(fileExtension)
    }

    // MARK: Index (called under the cache's lock)

    mutating func recordUse(ofSlot slot: String, size: Int, at date: Date) {
        if let old = index[slot] { usage -= old.size }
        index[slot] = IndexEntry(size: size, lastUsed: date)
        usage += size
    }

    mutating func forget(slot: String) {
        if let old = index.removeValue(forKey: slot) { usage -= old.size }
    }

    mutating func forgetAll() {
        index.removeAll()
        usage = 0
    }

    /// The slots to delete, least recently used first, to bring usage under the budget.
    mutating func slotsToEvict() -> [String] {
        guard usage > budget else { return [] }
        var victims: [String] = []
        for (slot, entry) in index.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }) {
            guard usage > budget else { break }
            victims.append(slot)
            usage -= entry.size
            index[slot] = nil
        }
        return victims
    }

    // MARK: Files (called without the lock)

    /// Creates the directory (mode 0700) if needed, then makes sure it is the process's own: a real
    /// directory, not a symbolic link, owned by this user, with its mode set to 0700. Checked on the
    /// opened directory itself (`O_NOFOLLOW`, `fstat`, `fchmod`), so a link swapped in between the
    /// check and the change is refused too.
    static func prepare(_ directory: URL) throws(CacheDirectoryError) {
        let path = directory.path
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .unusable(path: path, reason: "cannot create it: \(error.localizedDescription)")
        }
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        guard descriptor >= 0 else {
            let code = errno
            throw .unusable(
                path: path,
                reason: code == ELOOP || code == ENOTDIR
                    ? "it is a symbolic link or not a directory" : String(cString: strerror(code)))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw .unusable(path: path, reason: String(cString: strerror(errno)))
        }
        guard info.st_uid == geteuid() else {
            throw .unusable(path: path, reason: "it belongs to another user (uid \(info.st_uid))")
        }
        if info.st_mode & 0o777 != 0o700, fchmod(descriptor, 0o700) != 0 {
            throw .unusable(path: path, reason: "cannot make it owner-only: \(String(cString: strerror(errno)))")
        }
    }

    /// The slots on disk with their sizes and modification dates, for a warm start.
    static func scan(_ directory: URL) -> [(slot: String, size: Int, modified: Date)] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        let suffix = "." + fileExtension
        return names.compactMap { name in
            guard name.hasSuffix(suffix), !name.hasPrefix(".") else { return nil }
            var info = stat()
            guard stat(directory.appendingPathComponent(name).path, &info) == 0,
                (info.st_mode & S_IFMT) == S_IFREG
            else { return nil }
            #if canImport(Darwin)
            let modified = Double(info.st_mtimespec.tv_sec) + Double(info.st_mtimespec.tv_nsec) / 1e9
            #else
            let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            #endif
            return (String(name.dropLast(suffix.count)), Int(info.st_size), Date(timeIntervalSince1970: modified))
        }
    }

    /// Writes an entry atomically (a new owner-only file, then `rename`); returns the file's size.
    static func write(_ entry: APIResponseCache.Entry, to url: URL) throws -> Int {
        let data = encode(entry)
        do {
            try OwnerOnlyFile.write(data, to: url)
        } catch {
            throw CacheFileError.writeFailed(path: url.path, code: error.code)
        }
        return data.count
    }

    /// Reads and checks an entry. `nil` when there is no file.
    static func read(_ url: URL) throws(CacheFileError) -> APIResponseCache.Entry? {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            if FileManager.default.fileExists(atPath: url.path) {
                throw .damaged("unreadable: \(error.localizedDescription)")
            }
            return nil
        }
        return try decode(data)
    }

    static func encode(_ entry: APIResponseCache.Entry) -> Data {
        var metadata = ByteWriter()
        for field in [entry.key.method, entry.key.url, entry.key.bodyDigest, entry.key.partition] {
            metadata.write(field)
        }
        metadata.write(UInt64(bitPattern: Int64(entry.response.statusCode)))
        metadata.write(entry.response.url?.absoluteString ?? "")
        metadata.write(entry.storedAt.timeIntervalSince1970.bitPattern)
        metadata.write(UInt64(entry.response.headers.count))
        for (name, value) in entry.response.headers.sorted(by: { $0.key < $1.key }) {
            metadata.write(name)
            metadata.write(value)
        }
        metadata.write(UInt64(entry.response.body.count))

        var data = Data()
        data.reserveCapacity(metadata.bytes.count + entry.response.body.count + 17)
        data.append(contentsOf: magic)
        data.append(version)
        withUnsafeBytes(of: UInt32(metadata.bytes.count).bigEndian) { data.append(contentsOf: $0) }
        data.append(contentsOf: metadata.bytes)
        data.append(entry.response.body)
        let checksum = data.withUnsafeBytes { FNV1a.hash($0) }
        withUnsafeBytes(of: checksum.bigEndian) { data.append(contentsOf: $0) }
        return data
    }

    static func decode(_ data: Data) throws(CacheFileError) -> APIResponseCache.Entry {
        let headerLength = magic.count + 1 + 4
        guard data.count >= headerLength + 8 else { throw .damaged("truncated: \(data.count) bytes") }
        let result = data.withUnsafeBytes { bytes in Result { () throws(CacheFileError) in try decode(bytes) } }
        return try result.get()
    }

    private static func decode(_ bytes: UnsafeRawBufferPointer) throws(CacheFileError) -> APIResponseCache.Entry {
        let headerLength = magic.count + 1 + 4
        guard bytes.starts(with: magic) else { throw .damaged("not a cache file") }
        guard bytes[magic.count] == version else { throw .damaged("unknown version \(bytes[magic.count])") }
        let metadataLength = bytes[(magic.count + 1)..<headerLength].reduce(0) { $0 << 8 | Int($1) }
        let checksumOffset = bytes.count - 8
        guard metadataLength <= checksumOffset - headerLength else { throw .damaged("truncated metadata") }
        let stored = bytes[checksumOffset...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let actual = FNV1a.hash(UnsafeRawBufferPointer(rebasing: bytes[..<checksumOffset]))
        guard stored == actual else { throw .damaged("checksum mismatch (truncated or corrupt)") }
        var reader = ByteReader(
            bytes: UnsafeRawBufferPointer(rebasing: bytes[headerLength..<(headerLength + metadataLength)]))
        guard let method = reader.string(), let url = reader.string(), let bodyDigest = reader.string(),
            let partition = reader.string(), let status = reader.uint64(), let responseURL = reader.string(),
            let storedAt = reader.uint64(), let headerCount = reader.uint64(), headerCount < 10_000
        else { throw .damaged("unreadable metadata") }
        // Every number is checked: a forged NaN date would never expire.
        let storedSeconds = Double(bitPattern: storedAt)
        guard storedSeconds.isFinite, (0...Self.latestDate).contains(storedSeconds) else {
            throw .damaged("impossible date \(storedSeconds)")
        }
        let statusCode = Int64(bitPattern: status)
        guard (100...999).contains(statusCode) else { throw .damaged("impossible status \(statusCode)") }
        var headers: [String: String] = [:]
        for _ in 0..<headerCount {
            guard let name = reader.string(), let value = reader.string() else {
                throw .damaged("unreadable headers")
            }
            headers[name] = value
        }
        let bodyStart = headerLength + metadataLength
        guard let bodyLength = reader.uint64(), reader.isAtEnd,
            Int(clamping: bodyLength) == checksumOffset - bodyStart
        else { throw .damaged("body length mismatch") }
        let response = APIRawResponse(
            statusCode: Int(statusCode), headers: headers,
            body: Data(UnsafeRawBufferPointer(rebasing: bytes[bodyStart..<checksumOffset])),
            url: responseURL.isEmpty ? nil : URL(string: responseURL))
        return APIResponseCache.Entry(
            key: APIResponseCache.Key(method: method, url: url, bodyDigest: bodyDigest, partition: partition),
            response: response, storedAt: Date(timeIntervalSince1970: storedSeconds))
    }

    /// 4000-01-01: later dates in a cache file are forged or damaged.
    static let latestDate: TimeInterval = 64_060_588_800
}

/// Length-prefixed fields for cache files.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    mutating func write(_ value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func write(_ string: String) {
        let utf8 = string.utf8
        write(UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }
}

struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func uint64() -> UInt64? {
        guard bytes.count - offset >= 8 else { return nil }
        var value: UInt64 = 0
        for byte in bytes[offset..<(offset + 8)] { value = value << 8 | UInt64(byte) }
        offset += 8
        return value
    }

    mutating func string() -> String? {
        guard let length = uint64(), length <= UInt64(bytes.count - offset) else { return nil }
        let end = offset + Int(length)
        let string = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self)
        offset = end
        return string
    }
}

/// Why the disk tier cannot use its directory.
enum CacheDirectoryError: Error, CustomStringConvertible {
    case unusable(path: String, reason: String)

    var description: String {
        switch self {
        case .unusable(let path, let reason): return "the cache directory \(path) is unusable: \(reason)"
        }
    }
}

enum CacheFileError: Error, CustomStringConvertible {
    case damaged(String)
    case writeFailed(path: String, code: Int32)

    var description: String {
        switch self {
        case .damaged(let reason): return reason
        case .writeFailed(let path, let code): return "cannot write \(path): \(String(cString: strerror(code)))"
        }
    }
}
