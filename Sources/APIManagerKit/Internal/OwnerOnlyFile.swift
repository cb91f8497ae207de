import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Atomic writes of files only their owner may read: a new `0600` file, then `rename` over the target.
enum OwnerOnlyFile {
    struct WriteError: Error {
        let path: String
        /// The `errno` of the failing call.
        let code: Int32
    }

    /// The prefix of the temporary files a write makes beside its target.
    static let temporaryPrefix = ".tmp-"

    /// The prefix of the temporary files a write to `url` makes: `.tmp-NAME-`, then a UUID.
    static func temporaryPrefix(of url: URL) -> String { temporaryPrefix + url.lastPathComponent + "-" }

    static func write(_ data: Data, to url: URL) throws(WriteError) {
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(temporaryPrefix(of: url) + UUID().uuidString).path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw WriteError(path: temporary, code: errno) }
        var failure: Int32?
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Foundation.write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += written
            }
        }
        if close(descriptor) != 0, failure == nil { failure = errno }
        if failure == nil, rename(temporary, url.path) != 0 { failure = errno }
        if let failure {
            unlink(temporary)
            throw WriteError(path: url.path, code: failure)
        }
    }

    /// Removes the temporary files that writes killed before their `rename` left in `directory`
    /// (regular files only, never a link's target). Returns how many it removed.
    @discardableResult
    static func removeLeftovers(in directory: URL) -> Int {
        removeLeftovers(in: directory) { $0.hasPrefix(temporaryPrefix) }
    }

    /// Removes the temporary files that writes to `url` killed before their `rename` left beside it,
    /// and no other: in a directory shared with other files, only `.tmp-NAME-` and a UUID.
    @discardableResult
    static func removeLeftovers(of url: URL) -> Int {
        let prefix = temporaryPrefix(of: url)
        return removeLeftovers(in: url.deletingLastPathComponent()) { name in
            name.hasPrefix(prefix) && UUID(uuidString: String(name.dropFirst(prefix.count))) != nil
        }
    }

    private static func removeLeftovers(in directory: URL, where matches: (String) -> Bool) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        var removed = 0
        for name in names where matches(name) {
            let path = directory.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if unlink(path) == 0 { removed += 1 }
        }
        return removed
    }
}
