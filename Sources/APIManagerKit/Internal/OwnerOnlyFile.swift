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

    /// `synchronized`: the file's bytes and then its name reach the disk before this returns
    /// (`fsync` of the file before the `rename`, of its directory after), so that a power loss
    /// leaves the old file or the new one, never a name without its bytes.
    static func write(_ data: Data, to url: URL, synchronized: Bool = false) throws(WriteError) {
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
        if synchronized, failure == nil, fsync(descriptor) != 0 { failure = errno }
        if close(descriptor) != 0, failure == nil { failure = errno }
        if failure == nil, rename(temporary, url.path) != 0 { failure = errno }
        if let failure {
            unlink(temporary)
            throw WriteError(path: url.path, code: failure)
        }
        if synchronized { try synchronizeDirectory(of: url) }
    }

    /// Makes the names in `url`'s directory (a file created, renamed or removed there) reach the disk.
    static func synchronizeDirectory(of url: URL) throws(WriteError) {
        let directory = url.deletingLastPathComponent().path
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw WriteError(path: directory, code: errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw WriteError(path: directory, code: errno) }
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

    // MARK: Files of ours, never a link's target

    /// A new file at `url`, only its owner may read (`0600`), opened for writing: never through a
    /// link planted there (`O_NOFOLLOW`), never over a file that exists (`O_EXCL`).
    static func create(at url: URL) throws(WriteError) -> FileHandle {
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw WriteError(path: url.path, code: errno) }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// Replaces whatever is at `url` (a file, or a link, never its target) by a new owner-only file.
    static func replace(at url: URL) throws(WriteError) -> FileHandle {
        if unlink(url.path) != 0, errno != ENOENT { throw WriteError(path: url.path, code: errno) }
        return try create(at: url)
    }

    /// The file at `url` opened to append, when it is a regular file of this user's (not a link,
    /// not another user's); `nil` otherwise.
    static func openToAppend(_ url: URL) -> FileHandle? {
        let descriptor = open(url.path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
            close(descriptor)
            return nil
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// Whether `url` is a regular file of this user's (a link is not, whatever it points to).
    static func isRegularFileOfOurs(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && info.st_uid == geteuid()
    }

    /// The contents of `url` when it is a regular file of this user's; `nil` otherwise.
    static func read(_ url: URL) -> Data? {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
            return nil
        }
        return try? handle.readToEnd() ?? Data()
    }

    // MARK: Temporary files of this process

    /// A name for a temporary file of this process: `PREFIX-PID-UUID`, so that the files a killed
    /// process left can be told from those of processes still running (``sweepTemporaryFiles(prefix:)``).
    static func temporaryURL(prefix: String, in directory: URL? = nil) -> URL {
        (directory ?? FileManager.default.temporaryDirectory)
            .appendingPathComponent("\(prefix)-\(getpid())-\(UUID().uuidString)")
    }

    /// Removes the temporary files named `PREFIX-PID-UUID` whose process is gone (killed before it
    /// could remove them), this user's regular files only; and those named `PREFIX-UUID` (before the
    /// process was named) a day old. Returns how many it removed.
    @discardableResult
    static func sweepTemporaryFiles(prefix: String, in directory: URL = FileManager.default.temporaryDirectory) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        let ownPID = getpid()
        var removed = 0
        for name in names where name.hasPrefix(prefix + "-") {
            let rest = name.dropFirst(prefix.count + 1)
            let path = directory.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
                continue
            }
            let parts = rest.split(separator: "-", maxSplits: 1)
            if parts.count == 2, let pid = pid_t(parts[0]), UUID(uuidString: String(parts[1])) != nil {
                guard pid != ownPID, kill(pid, 0) != 0, errno == ESRCH else { continue }
            } else if UUID(uuidString: String(rest)) != nil {
                #if canImport(Darwin)
                let modified = Double(info.st_mtimespec.tv_sec)
                #else
                let modified = Double(info.st_mtim.tv_sec)
                #endif
                guard modified < Date().timeIntervalSince1970 - 86_400 else { continue }
            } else {
                continue
            }
            if unlink(path) == 0 { removed += 1 }
        }
        return removed
    }
}
