import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response cache with a memory tier and an optional disk tier, safe from any thread, the same on
/// every platform (it does not use `URLCache`).
///
/// Give it to an engine (`APIEngine(cache: .shared)`); requests then choose how to use it with
/// ``APIRequest/cacheOption``. Reads look in memory, then on disk (a disk hit is copied into memory).
/// Writes go to both tiers. Every read compares the stored key with the wanted one, so a hash
/// collision is a miss, never a wrong answer.
public final class APIResponseCache: @unchecked Sendable {
    // @unchecked: what changes is in `state`, behind its lock; file I/O happens outside it, and
    // files are replaced atomically.

    /// Settings of the disk tier.
    public struct DiskOptions: Sendable {
        /// Where the files go. `nil` (the default) means the user's caches directory on Apple platforms,
        /// `$XDG_CACHE_HOME` or `~/.cache` elsewhere, in a folder named `APIManagerKit`. Opening the
        /// cache removes the temporary files a process killed while writing left there (`.tmp-…`):
        /// give one running cache a directory at a time.
        public var directory: URL?
        /// The most bytes the files may take. 50 MiB unless set.
        public var budget: Int
        /// Entries older than this are removed instead of read. 7 days unless set.
        public var maxAge: TimeInterval
        /// Whether a new cache loads the newest files into memory, up to its budget. `true` unless set.
        public var warmsMemory: Bool

        /// Disk settings; each default is given with its property.
        public init(
            directory: URL? = nil, budget: Int = 50 << 20, maxAge: TimeInterval = 7 * 24 * 3600,
            warmsMemory: Bool = true
        ) {
            self.directory = directory
            self.budget = budget
            self.maxAge = maxAge
            self.warmsMemory = warmsMemory
        }

        /// `APIManagerKit` in the platform's caches directory.
        public static var defaultDirectory: URL {
            #if canImport(Darwin)
            let base =
                FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            #else
            let environment = ProcessInfo.processInfo.environment
            let base: URL
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                base = URL(fileURLWithPath: xdg, isDirectory: true)
            } else if let home = environment["HOME"], !home.isEmpty {
                base = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".cache")
            } else {
                base = FileManager.default.temporaryDirectory
            }
            #endif
            return base.appendingPathComponent("APIManagerKit", isDirectory: true)
        }
    }

    /// A cache with a 1 MiB memory tier and a disk tier in the default directory.
    public static let shared = APIResponseCache()

    /// The clock that dates entries and judges their age.
    public let clock: any APIClock
    let hasher: APIResponseCache.KeyHasher
    private let state: LockedState<State>

    /// Everything that changes, behind one lock; no file is read or written, and no handler
    /// called, while it is held.
    private struct State {
        var memory: MemoryCacheTier
        var disk: DiskCacheTier?
        var handler: (@Sendable (APIResponseCache.Event) -> Void)?
        /// Entries whose file a write-behind store has scheduled and not yet written, by slot: a
        /// read finds them here, so it never misses a store it came after.
        var pendingWrites: [String: (entry: APIResponseCache.Entry, write: UInt64)] = [:]
        var lastWrite: UInt64 = 0
    }
    /// Where write-behind stores write their files, one at a time and in order.
    private let ioQueue = DispatchQueue(label: "APIManagerKit.APIResponseCache.io")

    /// - Parameters:
    ///   - memoryBudget: bytes the memory tier may hold. 1 MiB unless given.
    ///   - disk: the disk tier's settings, or `nil` for memory only. The defaults unless given.
    ///   - clock: dates entries. A ``DispatchClock`` unless given.
    ///   - hasher: names slots. ``APIResponseCache/KeyHasher/fnv1a`` unless given.
    ///   - eventHandler: receives ``APIResponseCache/Event``s, including any from the warm start.
    public init(
        memoryBudget: Int = 1 << 20, disk: DiskOptions? = DiskOptions(), clock: any APIClock = DispatchClock(),
        hasher: APIResponseCache.KeyHasher = .fnv1a, eventHandler: (@Sendable (APIResponseCache.Event) -> Void)? = nil
    ) {
        self.clock = clock
        self.hasher = hasher
        var memory = MemoryCacheTier(budget: memoryBudget)
        let tier = disk.flatMap {
            Self.openDisk($0, clock: clock, hasher: hasher, memory: &memory, events: eventHandler)
        }
        self.state = LockedState(State(memory: memory, disk: tier, handler: eventHandler))
        if tier != nil { evictFromDisk() }
    }

    /// Opens the disk tier: removes leftovers and expired files, indexes the rest and, if asked,
    /// warms the memory tier from the newest. `nil` when the directory cannot be used.
    private static func openDisk(
        _ disk: DiskOptions, clock: any APIClock, hasher: APIResponseCache.KeyHasher, memory: inout MemoryCacheTier,
        events: (@Sendable (APIResponseCache.Event) -> Void)?
    ) -> DiskCacheTier? {
        let directory = disk.directory ?? DiskOptions.defaultDirectory
        do {
            try DiskCacheTier.prepare(directory)
        } catch {
            events?(.diskUnavailable(reason: error.description))
            return nil
        }
        // Writes killed between their temporary file and its rename left files no index knows.
        OwnerOnlyFile.removeLeftovers(in: directory)
        var tier = DiskCacheTier(directory: directory, budget: disk.budget, maxAge: disk.maxAge)
        let now = clock.date
        var expired: [String] = []
        var live: [String] = []  // newest first
        for file in DiskCacheTier.scan(directory).sorted(by: { $0.modified > $1.modified }) {
            if now.timeIntervalSince(file.modified) > disk.maxAge {
                expired.append(file.slot)
            } else {
                live.append(file.slot)
                tier.recordUse(ofSlot: file.slot, size: file.size, at: file.modified)
            }
        }
        for slot in expired {
            try? FileManager.default.removeItem(at: tier.fileURL(forSlot: slot))
        }
        if disk.warmsMemory {
            warmMemory(&memory, from: live, tier: tier, hasher: hasher)
        }
        return tier
    }

    /// Loads files, newest first, into memory until its budget is reached.
    private static func warmMemory(
        _ memory: inout MemoryCacheTier, from slots: [String], tier: DiskCacheTier, hasher: APIResponseCache.KeyHasher
    ) {
        var loaded = 0
        for slot in slots {
            guard loaded < memory.budget else { break }
            guard let entry = try? DiskCacheTier.read(tier.fileURL(forSlot: slot)),
                hasher.slot(for: entry.key) == slot
            else { continue }
            let cost = entry.cost
            guard loaded + cost <= memory.budget else { continue }
            loaded += cost
            _ = memory.store(entry, inSlot: slot)
        }
    }

    /// Receives every ``APIResponseCache/Event``, on the thread that caused it, without any lock held.
    public var eventHandler: (@Sendable (APIResponseCache.Event) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// Whether the disk tier is working (it turns off after a failed write).
    public var hasDiskTier: Bool { state.withLock { $0.disk != nil } }
    /// The directory of the disk tier, if it is working.
    public var diskDirectory: URL? { state.withLock { $0.disk?.directory } }
    /// Bytes held in memory.
    public var memoryUsage: Int { state.withLock { $0.memory.usage } }
    /// Entries held in memory.
    public var memoryCount: Int { state.withLock { $0.memory.count } }
    /// Bytes of the files the disk tier knows of.
    public var diskUsage: Int { state.withLock { $0.disk?.usage ?? 0 } }

    // MARK: Reading

    /// The entry stored for `key`, from memory or disk, whatever its age (the disk tier's expiry
    /// aside). A damaged file or a different key in the slot is a miss.
    public func entry(for key: APIResponseCache.Key) -> APIResponseCache.Entry? {
        let slot = hasher.slot(for: key)
        var events: [APIResponseCache.Event] = []
        defer { emit(events) }
        let (found, diskURL): (APIResponseCache.Entry?, URL?) = state.withLock {
            ($0.memory.entry(inSlot: slot) ?? $0.pendingWrites[slot]?.entry, $0.disk?.fileURL(forSlot: slot))
        }
        if let found {
            guard found.key == key else {
                events.append(.collision(key))
                return nil
            }
            events.append(.hit(key, .memory))
            return found
        }
        guard let diskURL else {
            events.append(.miss(key))
            return nil
        }
        let stored: APIResponseCache.Entry?
        do {
            stored = try DiskCacheTier.read(diskURL)
        } catch {
            removeFile(diskURL, slot: slot)
            events.append(.removedDamagedFile(name: diskURL.lastPathComponent, reason: error.description))
            events.append(.miss(key))
            return nil
        }
        guard let stored else {
            state.withLock { $0.disk?.forget(slot: slot) }
            events.append(.miss(key))
            return nil
        }
        guard stored.key == key else {
            events.append(.collision(key))
            return nil
        }
        let now = clock.date
        let expired: Bool = state.withLock { state in
            guard let tier = state.disk else { return false }
            if now.timeIntervalSince(stored.storedAt) > tier.maxAge { return true }
            state.disk?.recordUse(ofSlot: slot, size: tier.index[slot]?.size ?? 0, at: now)
            events += state.memory.store(stored, inSlot: slot).map { .evicted($0.key) }
            return false
        }
        if expired {
            removeFile(diskURL, slot: slot)
            events.append(.expired(key))
            return nil
        }
        events.append(.hit(key, .disk))
        return stored
    }

    // MARK: Writing

    /// Stores a response for `key` in both tiers, dated now. A failed disk write turns the disk tier
    /// off (with a ``APIResponseCache/Event/diskUnavailable(reason:)`` event); memory goes on.
    public func store(_ response: APIRawResponse, for key: APIResponseCache.Key) {
        store(APIResponseCache.Entry(key: key, response: response, storedAt: clock.date))
    }

    func store(_ entry: APIResponseCache.Entry) {
        store(entry, writingBehind: false)
    }

    /// Stores in memory at once; the file is written now, or, `writingBehind`, later on the cache's
    /// own queue, so the caller (an attempt about to end) does not wait for the disk. Until it is
    /// written, reads find the entry among the pending writes.
    func store(_ entry: APIResponseCache.Entry, writingBehind: Bool) {
        let slot = hasher.slot(for: entry.key)
        var events: [APIResponseCache.Event] = []
        let (diskURL, write): (URL?, UInt64) = state.withLock { state in
            events += state.memory.store(entry, inSlot: slot).map { .evicted($0.key) }
            let url = state.disk?.fileURL(forSlot: slot)
            state.lastWrite += 1
            if writingBehind, url != nil { state.pendingWrites[slot] = (entry, state.lastWrite) }
            return (url, state.lastWrite)
        }
        events.append(.stored(entry.key, bytes: entry.response.body.count))
        emit(events)
        guard let diskURL else { return }
        if writingBehind {
            ioQueue.async { self.writeFile(entry, slot: slot, to: diskURL, write: write) }
        } else {
            writeFile(entry, slot: slot, to: diskURL, write: write)
        }
    }

    private func writeFile(_ entry: APIResponseCache.Entry, slot: String, to diskURL: URL, write: UInt64) {
        var events: [APIResponseCache.Event] = []
        defer { emit(events) }
        defer {
            // Only this write's own pending entry: a later store of the slot stays pending.
            state.withLock { if $0.pendingWrites[slot]?.write == write { $0.pendingWrites[slot] = nil } }
        }
        do {
            let size = try DiskCacheTier.write(entry, to: diskURL)
            state.withLock { $0.disk?.recordUse(ofSlot: slot, size: size, at: entry.storedAt) }
            evictFromDisk()
        } catch {
            let wasOn: Bool = state.withLock { state in
                defer { state.disk = nil }
                return state.disk != nil
            }
            if wasOn { events.append(.diskUnavailable(reason: "\(error)")) }
        }
    }

    /// Marks the entry as confirmed by the server now (after a `304 Not Modified`), merging the
    /// new response's headers into the stored ones.
    func refresh(
        _ entry: APIResponseCache.Entry, with notModified: APIRawResponse, writingBehind: Bool = false
    ) -> APIResponseCache.Entry {
        var refreshed = entry
        refreshed.storedAt = clock.date
        for (name, value) in notModified.headers where Self.refreshableHeaders.contains(name.lowercased()) {
            let existing = refreshed.response.headers.keys.first { $0.lowercased() == name.lowercased() }
            refreshed.response.headers[existing ?? name] = value
        }
        store(refreshed, writingBehind: writingBehind)
        return refreshed
    }

    private static let refreshableHeaders: Set<String> = [
        "etag", "last-modified", "cache-control", "expires", "date", "vary",
    ]

    /// Removes the entry for `key` from both tiers.
    public func remove(for key: APIResponseCache.Key) {
        let slot = hasher.slot(for: key)
        let url: URL? = state.withLock { state in
            state.memory.removeEntry(inSlot: slot)
            state.pendingWrites[slot] = nil
            return state.disk?.fileURL(forSlot: slot)
        }
        // After any write of this file still queued, so the removal is the last word.
        if let url { ioQueue.sync { removeFile(url, slot: slot) } }
    }

    /// Removes the entry a request would read: the same method, URL, body and partition.
    public func remove(for request: URLRequest, partition: String? = nil) {
        remove(for: APIResponseCache.Key(request: request, partition: partition))
    }

    /// Empties both tiers: every cache file in the directory (another instance's too) and the
    /// temporary files of writes a killed process left.
    public func removeAll() {
        let directory: URL? = state.withLock { state in
            state.memory.removeAll()
            state.disk?.forgetAll()
            state.pendingWrites.removeAll()
            return state.disk?.directory
        }
        guard let directory else { return }
        ioQueue.sync {
            for file in DiskCacheTier.scan(directory) {
                try? FileManager.default.removeItem(
                    at: DiskCacheTier.fileURL(in: directory, slot: file.slot))
            }
            OwnerOnlyFile.removeLeftovers(in: directory)
        }
    }

    // MARK: Helpers

    private func removeFile(_ url: URL, slot: String) {
        state.withLock { $0.disk?.forget(slot: slot) }
        try? FileManager.default.removeItem(at: url)
    }

    private func evictFromDisk() {
        let (victims, directory): ([String], URL?) = state.withLock {
            ($0.disk?.slotsToEvict() ?? [], $0.disk?.directory)
        }
        guard let directory, !victims.isEmpty else { return }
        for slot in victims {
            try? FileManager.default.removeItem(
                at: DiskCacheTier.fileURL(in: directory, slot: slot))
        }
        emit(victims.map { .evictedFile(slot: $0) })
    }

    /// Reports an event on behalf of the engine.
    func note(_ event: APIResponseCache.Event) {
        emit([event])
    }

    private func emit(_ events: [APIResponseCache.Event]) {
        guard !events.isEmpty, let handler = state.withLock({ $0.handler }) else { return }
        for event in events { handler(event) }
    }
}
