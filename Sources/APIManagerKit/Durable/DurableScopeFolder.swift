import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The folder of one durable scope (see ``APIEngine/DurableStore``): a record file per pending task,
/// named by its sequence (`00000000000000000042.task`), a `lock` file this process holds while the
/// folder is open, and `set-aside/`, where records that could not be replayed are moved (never
/// deleted).
///
/// Not thread-safe: its store calls it under the store's lock. Only its owner may read it: the
/// folders are `0700`, the files `0600`.
final class DurableScopeFolder {
    let url: URL
    /// Where records that could not be replayed go.
    let setAsideURL: URL
    /// The open `lock` file, locked (`flock`, exclusive) for as long as this folder is open.
    private let lockDescriptor: Int32
    /// The sequence the next record gets.
    private(set) var nextSequence: UInt64
    /// The records a replay checked but left on disk (beyond its window), until each is made into
    /// its task; `nil` when there are none.
    var backlog: Backlog?
    /// Writes a record's bytes (a seam for tests of a full disk).
    private let write: @Sendable (Data, URL) throws(OwnerOnlyFile.WriteError) -> Void

    static let recordSuffix = ".task"
    /// The suffix of a refused task's record, kept while it stops its line.
    static let refusedSuffix = ".refused"

    /// Opens the folder of `scope` in `directory`, creating it as needed, and locks it.
    ///
    /// - Throws: ``APIError/durableStore(reason:underlying:)`` when the folder cannot be made or
    ///   opened, or another process (or another store of this one) has it open.
    init(
        scope: String?, in directory: URL,
        write: @escaping @Sendable (Data, URL) throws(OwnerOnlyFile.WriteError) -> Void
    ) throws(APIError) {
        url = directory.appendingPathComponent(Self.folderName(of: scope), isDirectory: true)
        setAsideURL = url.appendingPathComponent("set-aside", isDirectory: true)
        self.write = write
        for folder in [directory, url, setAsideURL] {
            do {
                try FileManager.default.createDirectory(
                    at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .durableStore(reason: "the folder \(folder.path) cannot be made", underlying: error)
            }
            // The folders the store writes into are its own, each checked before anything is made
            // in it: never a link (followed, a record would be moved or written outside the
            // store), never another user's. The store's directory is the app's to choose, links
            // included.
            if folder != directory { try Self.checkOwnFolder(folder) }
        }
        let lockPath = url.appendingPathComponent("lock").path
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .durableStore(
                reason: "the lock file \(lockPath) cannot be opened", underlying: POSIXError.from(errno))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            close(descriptor)
            throw .durableStore(
                reason: "the durable scope \(Self.describe(scope)) is open elsewhere (another process, or another "
                    + "store on \(directory.path)); one store at a time may own a scope",
                underlying: POSIXError.from(code))
        }
        lockDescriptor = descriptor
        OwnerOnlyFile.removeLeftovers(in: url)
        let highest =
            (Self.sequences(in: url) + Self.sequences(in: setAsideURL) + Self.refusedSequencesStatic(in: url)).max()
            ?? 0
        nextSequence = highest + 1
        finishReplacements()
    }

    deinit {
        flock(lockDescriptor, LOCK_UN)
        close(lockDescriptor)
    }

    /// Throws unless `folder` is a directory (not a link to one) owned by this process's user.
    private static func checkOwnFolder(_ folder: URL) throws(APIError) {
        var status = stat()
        guard lstat(folder.path, &status) == 0 else {
            throw .durableStore(reason: "the folder \(folder.path) cannot be read", underlying: POSIXError.from(errno))
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw .durableStore(
                reason: "\(folder.path) is not a folder of the store's (a link, or another kind of file): "
                    + "nothing is read from or moved into it")
        }
        guard status.st_uid == geteuid() else {
            throw .durableStore(
                reason: "the folder \(folder.path) belongs to another user: nothing is read from or moved into it")
        }
    }

    /// Finishes what a kill interrupted in a refusal's resolution by a replacement
    /// (``APIEngine/DurableStore/Resolution/replace(_:)``), whose one step that counts is the
    /// replacement's record put in place (written whole, then renamed): a `.refused` record beside
    /// a `.task` record of the same sequence was replaced, and goes. Every other state a kill leaves
    /// is one already: the line still stopped (only `.refused`), or resolved (only `.task`, or
    /// neither).
    private func finishReplacements() {
        for sequence in refusedSequences() where FileManager.default.fileExists(atPath: fileURL(of: sequence).path) {
            dropRefused(sequence)
        }
    }

    /// The folder's name for a scope: readable, and safe whatever the scope's characters (a hash
    /// tells apart scopes whose readable parts are the same).
    static func folderName(of scope: String?) -> String {
        guard let scope else { return "unscoped" }
        let readable = String(
            scope.unicodeScalars.prefix(40).map { scalar -> Character in
                scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_"
                    ? Character(scalar) : "_"
            })
        var hash = SHA256()
        hash.update(Array(scope.utf8))
        return "scope-\(readable)-\(SHA256.hex(hash.finalize().prefix(8)))"
    }

    static func describe(_ scope: String?) -> String { scope.map { "\"\($0)\"" } ?? "(no scope)" }

    /// The sequences of the refused records in `folder`, unordered.
    private static func refusedSequencesStatic(in folder: URL) -> [UInt64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.compactMap { name in
            guard name.hasSuffix(refusedSuffix) else { return nil }
            return sequence(ofFileNamed: String(name.dropLast(refusedSuffix.count)) + recordSuffix)
        }
    }

    /// The sequences of the records in `folder`, unordered.
    private static func sequences(in folder: URL) -> [UInt64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.compactMap(sequence(ofFileNamed:))
    }

    static func sequence(ofFileNamed name: String) -> UInt64? {
        guard name.hasSuffix(recordSuffix) else { return nil }
        let digits = name.dropLast(recordSuffix.count)
        guard digits.count == 20, digits.allSatisfy(\.isASCII) else { return nil }
        return UInt64(digits)
    }

    func fileURL(of sequence: UInt64) -> URL {
        url.appendingPathComponent(Self.fileName(of: sequence))
    }

    private static func fileName(of sequence: UInt64) -> String {
        let digits = String(sequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + recordSuffix
    }

    /// The pending records' sequences, in the order they replay.
    func pendingSequences() -> [UInt64] {
        Self.sequences(in: url).sorted()
    }

    /// The records of refused tasks that stop the line, oldest first.
    func refusedSequences() -> [UInt64] {
        Self.refusedSequencesStatic(in: url).sorted()
    }

    /// Where the record of a refused task is kept.
    func refusedURL(of sequence: UInt64) -> URL {
        url.appendingPathComponent(
            String(Self.fileName(of: sequence).dropLast(Self.recordSuffix.count)) + Self.refusedSuffix)
    }

    /// Keeps a refused task's record, out of the line, until the app resolves the refusal.
    func keepRefused(_ sequence: UInt64) {
        if rename(fileURL(of: sequence).path, refusedURL(of: sequence).path) == 0 {
            try? OwnerOnlyFile.synchronizeDirectory(of: url.appendingPathComponent("lock"))
        }
    }

    /// Puts a refused record back in the line (to send it again) and reads it.
    func reinstateRefused(_ sequence: UInt64) -> Result<DurableRecord, APIError> {
        guard rename(refusedURL(of: sequence).path, fileURL(of: sequence).path) == 0 else {
            return .failure(
                .durableStore(
                    reason: "the refused record \(sequence) cannot be put back", underlying: POSIXError.from(errno)))
        }
        return read(sequence)
    }

    /// Removes a refused task's record (the app dropped it, or its replacement is in place).
    func dropRefused(_ sequence: UInt64) {
        if unlink(refusedURL(of: sequence).path) == 0 {
            try? OwnerOnlyFile.synchronizeDirectory(of: url.appendingPathComponent("lock"))
        }
    }

    /// Reads the record `sequence` back, whole or not at all.
    func read(_ sequence: UInt64) -> Result<DurableRecord, APIError> {
        let file = fileURL(of: sequence)
        guard let bytes = OwnerOnlyFile.read(file) else {
            return .failure(
                .durableStore(reason: "the record \(file.path) cannot be read (not a regular file of ours)"))
        }
        do {
            return .success(try DurableRecord(bytes: bytes))
        } catch {
            return .failure(.durableStore(reason: "the record \(file.path) is damaged: \(error)", underlying: error))
        }
    }

    /// Writes a new record with the next sequence, its bytes and name on disk before it returns.
    func append(idempotencyKey: String?, requestType: String, request: Data) throws(APIError) -> UInt64 {
        let sequence = nextSequence
        try write(
            DurableRecord(
                sequence: sequence, idempotencyKey: idempotencyKey, requestType: requestType, request: request))
        nextSequence += 1
        return sequence
    }

    /// Writes `record` under its sequence (a new record, or a refused one's replacement).
    func write(_ record: DurableRecord) throws(APIError) {
        let file = fileURL(of: record.sequence)
        do {
            try write(record.bytes, file)
        } catch {
            throw .durableStore(
                reason: "the task could not be written to \(file.path) (\(String(cString: strerror(error.code))))",
                underlying: POSIXError.from(error.code))
        }
    }

    /// Removes a record (its task ended). A record already gone is not an error. The removal is
    /// not `fsync`ed: one a power cut undoes replays, with its idempotency key, a task the server
    /// already answered, which costs less than an `fsync` for every task that ends.
    func remove(_ sequence: UInt64) {
        unlink(fileURL(of: sequence).path)
    }

    /// Moves a record that cannot be replayed into `set-aside/`, under the same name; returns where
    /// it now is (or where it was, if it could not be moved).
    func setAside(_ sequence: UInt64) -> URL {
        let from = fileURL(of: sequence)
        let to = setAsideURL.appendingPathComponent(from.lastPathComponent)
        guard rename(from.path, to.path) == 0 else { return from }
        try? OwnerOnlyFile.synchronizeDirectory(of: to)
        try? OwnerOnlyFile.synchronizeDirectory(of: from)
        return to
    }
}

extension DurableScopeFolder {
    /// A replay's records still on disk, in their line's order, and how many of its restored tasks
    /// are in memory (not yet ended).
    struct Backlog {
        private let sequences: [UInt64]
        private var position = 0
        /// Makes the records' tasks (its manager decodes them).
        let restorer: DurableRestorer
        /// The window's tasks that have not ended.
        var inWindow: Int

        init(sequences: [UInt64], restorer: DurableRestorer, inWindow: Int) {
            self.sequences = sequences
            self.restorer = restorer
            self.inWindow = inWindow
        }

        /// Whether every record has been taken (or the rest abandoned).
        var isDrained: Bool { position >= sequences.count }
        /// How many records are still to be taken.
        var remaining: Int { sequences.count - position }

        /// The next record's sequence, taken.
        mutating func next() -> UInt64? {
            guard position < sequences.count else { return nil }
            defer { position += 1 }
            return sequences[position]
        }

        /// Leaves the rest on disk, for the next launch (the manager is gone).
        mutating func abandon() { position = sequences.count }
    }
}

extension POSIXError {
    /// The error for an `errno` value (`EIO` for one Foundation does not know).
    static func from(_ code: Int32) -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
    }
}
