extension APIRetryPolicy {
    /// A source of uniformly distributed numbers in `0..<1`, used for retry jitter. Inject a fixed
    /// one in tests to check the delay table exactly.
    public protocol RandomSource: Sendable {
        /// A number in `0..<1`.
        func nextUnitInterval() -> Double
    }
}

extension APIRetryPolicy {
    /// The system's random number generator.
    public struct SystemRandomSource: APIRetryPolicy.RandomSource {
        /// The system's generator.
        public init() {}
        public func nextUnitInterval() -> Double { Double.random(in: 0..<1) }
    }
}
