/// A set of HTTP status codes: ranges, single codes, or both, as ``APIRequest/acceptableStatusCodes``
/// takes them.
///
/// ```swift
/// var acceptableStatusCodes: APIStatusCodes { .success.union([304, 409]) }  // a range and single codes
/// ```
///
/// Single codes alone are an array literal (`[200, 201, 304]`), a range `APIStatusCodes(200..<300)`.
public struct APIStatusCodes: Sendable, Hashable, ExpressibleByArrayLiteral, CustomStringConvertible {
    /// The ranges the set is made of, sorted, neither empty nor overlapping nor touching.
    public private(set) var ranges: [Range<Int>]

    /// Every code in `range`.
    public init(_ range: Range<Int>) {
        self.ranges = []
        insert(range)
    }

    /// Every code in `range`.
    public init(_ range: ClosedRange<Int>) {
        self.init(range.lowerBound..<(range.upperBound == .max ? .max : range.upperBound + 1))
    }

    /// Exactly the given codes.
    public init(_ codes: some Sequence<Int>) {
        self.ranges = []
        for code in codes where code < .max { insert(code..<(code + 1)) }
    }

    public init(arrayLiteral codes: Int...) {
        self.init(codes)
    }

    /// `200..<300`: the default of every request.
    public static let success = APIStatusCodes(200..<300)

    /// Whether the set holds `code`.
    public func contains(_ code: Int) -> Bool {
        ranges.contains { $0.contains(code) }
    }

    /// The codes of both sets.
    public func union(_ other: APIStatusCodes) -> APIStatusCodes {
        var union = self
        for range in other.ranges { union.insert(range) }
        return union
    }

    /// `200..<300`, `304` or `[200..<300, 304]`.
    public var description: String {
        let parts = ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)..<\($0.upperBound)" }
        return parts.count == 1 ? parts[0] : "[\(parts.joined(separator: ", "))]"
    }

    private mutating func insert(_ range: Range<Int>) {
        guard !range.isEmpty else { return }
        var merged = range
        var kept: [Range<Int>] = []
        for existing in ranges {
            if existing.upperBound < merged.lowerBound || merged.upperBound < existing.lowerBound {
                kept.append(existing)
            } else {
                merged = min(existing.lowerBound, merged.lowerBound)..<max(existing.upperBound, merged.upperBound)
            }
        }
        kept.append(merged)
        ranges = kept.sorted { $0.lowerBound < $1.lowerBound }
    }
}

extension APIStatusCodes {
    /// What ``APIRequest/acceptableStatusCodes`` may be declared as: an ``APIStatusCodes``, or a
    /// `Range<Int>`, `ClosedRange<Int>`, `Set<Int>` or `[Int]`, each read as the codes it holds.
    public protocol Convertible: Sendable {
        /// The codes, as an ``APIStatusCodes``.
        var statusCodes: APIStatusCodes { get }
    }
}

extension APIStatusCodes: APIStatusCodes.Convertible {
    /// Itself.
    public var statusCodes: APIStatusCodes { self }
}

extension Range: APIStatusCodes.Convertible where Bound == Int {
    /// Every code in the range.
    public var statusCodes: APIStatusCodes { APIStatusCodes(self) }
}

extension ClosedRange: APIStatusCodes.Convertible where Bound == Int {
    /// Every code in the range.
    public var statusCodes: APIStatusCodes { APIStatusCodes(self) }
}

extension Set: APIStatusCodes.Convertible where Element == Int {
    /// Exactly these codes.
    public var statusCodes: APIStatusCodes { APIStatusCodes(self) }
}

extension Array: APIStatusCodes.Convertible where Element == Int {
    /// Exactly these codes.
    public var statusCodes: APIStatusCodes { APIStatusCodes(self) }
}
