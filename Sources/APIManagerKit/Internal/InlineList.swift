/// A list that keeps its first element inline: nearly always one, so appending it allocates nothing.
struct InlineList<Element>: Sequence {
    private var first: Element?
    private var more: [Element] = []

    var isEmpty: Bool { first == nil }

    mutating func append(_ element: Element) {
        if first == nil { first = element } else { more.append(element) }
    }

    func makeIterator() -> Iterator {
        Iterator(first: first, more: more.makeIterator())
    }

    struct Iterator: IteratorProtocol {
        fileprivate var first: Element?
        fileprivate var more: IndexingIterator<[Element]>

        mutating func next() -> Element? {
            if let element = first {
                first = nil
                return element
            }
            return more.next()
        }
    }
}
