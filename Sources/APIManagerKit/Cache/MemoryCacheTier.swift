/// The memory tier: a byte budget, kept by evicting the least-used entry, the least recently used
/// among equals (counting accesses, with recency to break ties).
///
/// Constant time for lookup, insertion, use and eviction: entries hang in per-frequency lists,
/// oldest first, and the frequency lists are themselves linked in increasing order (the O(1) LFU
/// scheme of Shah, Mitra and Matani). Not thread-safe: ``APIResponseCache`` guards it.
struct MemoryCacheTier {
    final class Node {
        let slot: String
        var entry: APIResponseCache.Entry
        var cost: Int
        unowned(unsafe) var bucket: Bucket
        var previous: Node?
        var next: Node?
        init(slot: String, entry: APIResponseCache.Entry, cost: Int, bucket: Bucket) {
            self.slot = slot
            self.entry = entry
            self.cost = cost
            self.bucket = bucket
        }
    }

    /// The entries used `frequency` times, least recently used first.
    final class Bucket {
        let frequency: Int
        var head: Node?
        var tail: Node?
        var previous: Bucket?
        var next: Bucket?
        init(frequency: Int) { self.frequency = frequency }

        var isEmpty: Bool { head == nil }

        func append(_ node: Node) {
            node.bucket = self
            node.previous = tail
            node.next = nil
            if let tail { tail.next = node } else { head = node }
            tail = node
        }

        func remove(_ node: Node) {
            if let previous = node.previous { previous.next = node.next } else { head = node.next }
            if let next = node.next { next.previous = node.previous } else { tail = node.previous }
            node.previous = nil
            node.next = nil
        }
    }

    let budget: Int
    private(set) var usage = 0
    private var nodes: [String: Node] = [:]
    /// The bucket of the lowest frequency.
    private var lowest: Bucket?

    init(budget: Int) { self.budget = max(0, budget) }

    var count: Int { nodes.count }

    /// The entry in a slot, counted as a use.
    mutating func entry(inSlot slot: String) -> APIResponseCache.Entry? {
        guard let node = nodes[slot] else { return nil }
        touch(node)
        return node.entry
    }

    /// Stores an entry, replacing the slot's, and returns what was evicted to make room. An entry
    /// larger than the whole budget is not kept.
    mutating func store(_ entry: APIResponseCache.Entry, inSlot slot: String) -> [APIResponseCache.Entry] {
        let cost = entry.cost
        if let node = nodes[slot] {
            guard cost <= budget else {
                // The new entry does not fit at all: the old one is out of date, so the slot empties.
                remove(node)
                return []
            }
            usage += cost - node.cost
            node.entry = entry
            node.cost = cost
            touch(node)
        } else {
            guard cost <= budget else { return [] }
            let bucket: Bucket
            if let lowest, lowest.frequency == 1 {
                bucket = lowest
            } else {
                bucket = Bucket(frequency: 1)
                bucket.next = lowest
                lowest?.previous = bucket
                lowest = bucket
            }
            let node = Node(slot: slot, entry: entry, cost: cost, bucket: bucket)
            bucket.append(node)
            nodes[slot] = node
            usage += cost
        }
        var evicted: [APIResponseCache.Entry] = []
        while usage > budget, let victim = lowest?.head {
            // Never evict what was just stored unless it is alone over budget.
            if victim.slot == slot, nodes.count == 1 { break }
            let target = victim.slot == slot ? (victim.next ?? victim.bucket.next?.head) : victim
            guard let target else { break }
            remove(target)
            evicted.append(target.entry)
        }
        return evicted
    }

    @discardableResult
    mutating func removeEntry(inSlot slot: String) -> APIResponseCache.Entry? {
        guard let node = nodes[slot] else { return nil }
        remove(node)
        return node.entry
    }

    mutating func removeAll() {
        var bucket = lowest
        while let current = bucket {
            var node = current.head
            while let next = node {
                node = next.next
                next.previous = nil
                next.next = nil
            }
            bucket = current.next
            current.previous = nil
            current.next = nil
        }
        nodes.removeAll()
        lowest = nil
        usage = 0
    }

    /// Moves a node to the next frequency's bucket, as its most recent entry.
    private mutating func touch(_ node: Node) {
        let bucket = node.bucket
        let target: Bucket
        if let next = bucket.next, next.frequency == bucket.frequency + 1 {
            target = next
        } else {
            target = Bucket(frequency: bucket.frequency + 1)
            target.previous = bucket
            target.next = bucket.next
            bucket.next?.previous = target
            bucket.next = target
        }
        bucket.remove(node)
        target.append(node)
        if bucket.isEmpty { unlink(bucket) }
    }

    private mutating func remove(_ node: Node) {
        let bucket = node.bucket
        bucket.remove(node)
        if bucket.isEmpty { unlink(bucket) }
        nodes[node.slot] = nil
        usage -= node.cost
    }

    private mutating func unlink(_ bucket: Bucket) {
        if let previous = bucket.previous { previous.next = bucket.next } else { lowest = bucket.next }
        bucket.next?.previous = bucket.previous
        bucket.previous = nil
        bucket.next = nil
    }
}
