import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A ready-made retry decision: which failures are retried, how often, and after what delay.
///
/// Attach it to a request with ``APIRequest/retryPolicy``; the default
/// ``APIManager/retryDelay(for:afterAttempt:error:)`` consults it. ``delay(afterAttempt:error:method:randomUnit:now:)``
/// is a pure function, so the delay table can be tested without waiting.
///
/// Whatever the policy says, cancelled, ignored, timed-out, decoding, too-large and authentication
/// failures are never retried.
public struct APIRetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included. `3` unless set.
    public var maxAttempts: Int
    /// The backoff before the second attempt, doubled for each attempt after it. `0.5` s unless set.
    public var baseDelay: TimeInterval
    /// The largest backoff. `30` s unless set.
    public var maxDelay: TimeInterval
    /// How the backoff is spread. `.full` unless set.
    public var jitter: Jitter
    /// Statuses worth another attempt. `[408, 429, 500, 502, 503, 504]` unless set.
    public var retryableStatusCodes: Set<Int>
    /// Transport errors worth another attempt. Timeouts and lost, refused or absent connections
    /// unless set.
    public var retryableURLErrorCodes: Set<URLError.Code>
    /// Whether a `Retry-After` header (seconds or HTTP date) on a 429 or 503 sets the delay. `true`
    /// unless set.
    public var honorsRetryAfter: Bool
    /// A `Retry-After` longer than this gives up instead of waiting. `300` s unless set.
    public var maxRetryAfter: TimeInterval
    /// Whether non-idempotent methods (POST, PATCH …) are retried too. `false` unless set.
    public var retriesNonIdempotentRequests: Bool

    /// How the exponential backoff is randomised.
    public enum Jitter: Sendable, Hashable {
        /// Exactly `min(maxDelay, baseDelay × 2^(attempt − 1))`.
        case none
        /// A uniformly random delay between 0 and the exponential backoff ("full jitter").
        case full
    }

    /// `408`, `429`, `500`, `502`, `503` and `504`.
    public static let defaultRetryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Timeouts and lost, refused or absent connections and hosts.
    public static let defaultRetryableURLErrorCodes: Set<URLError.Code> = [
        .timedOut, .cannotFindHost, .cannotConnectToHost, .networkConnectionLost, .dnsLookupFailed,
        .notConnectedToInternet,
    ]

    /// A policy; each default is given with its property.
    public init(
        maxAttempts: Int = 3,
        baseDelay: TimeInterval = 0.5,
        maxDelay: TimeInterval = 30,
        jitter: Jitter = .full,
        retryableStatusCodes: Set<Int> = APIRetryPolicy.defaultRetryableStatusCodes,
        retryableURLErrorCodes: Set<URLError.Code> = APIRetryPolicy.defaultRetryableURLErrorCodes,
        honorsRetryAfter: Bool = true,
        maxRetryAfter: TimeInterval = 300,
        retriesNonIdempotentRequests: Bool = false
    ) {
        self.maxAttempts = maxAttempts
        self.baseDelay = max(0, baseDelay)
        self.maxDelay = max(0, maxDelay)
        self.jitter = jitter
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableURLErrorCodes = retryableURLErrorCodes
        self.honorsRetryAfter = honorsRetryAfter
        self.maxRetryAfter = maxRetryAfter
        self.retriesNonIdempotentRequests = retriesNonIdempotentRequests
    }

    /// Three attempts, 0.5 s base, full jitter.
    public static let `default` = APIRetryPolicy()

    /// Whether the policy considers this failure worth another attempt at all (ignoring the count).
    public func isRetryable(_ error: APIError, method: HTTPMethod) -> Bool {
        guard method.isIdempotent || retriesNonIdempotentRequests else { return false }
        switch error {
        case .unacceptableStatus(let response, _):
            return retryableStatusCodes.contains(response.statusCode)
        case .transport(let underlying):
            guard let urlError = underlying as? URLError else { return false }
            return retryableURLErrorCodes.contains(urlError.code)
        case .cancelled, .ignored, .timedOut, .invalidRequest, .decoding, .rejected, .responseTooLarge,
            .authenticationFailed, .lineFull, .waitedTooLong, .circuitOpen, .durableStore:
            return false
        }
    }

    /// The delay before the attempt after `attempt` (1 for the first), or `nil` to give up.
    ///
    /// - Parameters:
    ///   - attempt: the attempt that failed, 1 for the first.
    ///   - error: how it failed.
    ///   - method: the request's method (non-idempotent ones are retried only when opted in).
    ///   - randomUnit: a number in `0..<1` from an ``APIRetryPolicy/RandomSource``, used by `.full` jitter.
    ///   - now: the current date, to turn an HTTP-date `Retry-After` into a delay.
    public func delay(
        afterAttempt attempt: Int, error: APIError, method: HTTPMethod, randomUnit: Double, now: Date
    ) -> TimeInterval? {
        guard attempt >= 1, attempt < maxAttempts, isRetryable(error, method: method) else { return nil }
        if honorsRetryAfter, case .unacceptableStatus(let response, _) = error,
            response.statusCode == 429 || response.statusCode == 503,
            let header = response.value(forHeader: "Retry-After")
        {
            if let retryAfter = Self.retryAfterDelay(header, now: now) {
                return retryAfter <= maxRetryAfter ? retryAfter : nil
            }
        }
        let exponent = Double(min(attempt - 1, 62))
        let backoff = min(maxDelay, baseDelay * pow(2, exponent))
        switch jitter {
        case .none: return backoff
        case .full: return backoff * min(max(randomUnit, 0), 1)
        }
    }

    /// The delay a `Retry-After` value asks for (RFC 9110 §10.2.3): a number of seconds (digits
    /// only, `delay-seconds = 1*DIGIT`: no sign, no fraction), or an HTTP date, whose delay is
    /// counted from `now` and is never negative. `nil` when it is neither.
    public static func retryAfterDelay(_ value: String, now: Date) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // Too many digits for an Int is still a number of seconds: a very long wait.
            return Int(trimmed).map(TimeInterval.init) ?? .greatestFiniteMagnitude
        }
        guard let date = HTTPDate.parse(trimmed, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
