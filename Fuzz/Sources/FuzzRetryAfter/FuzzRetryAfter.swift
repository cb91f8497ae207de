import Foundation

@testable import APIManagerKit

/// `Retry-After` values and HTTP dates from a server: never a crash, and a delay is always a finite,
/// non-negative number of seconds.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryAfter(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    if let delay = APIRetryPolicy.retryAfterDelay(text, now: now) {
        precondition(delay.isFinite && delay >= 0, "Retry-After \(text.debugDescription) gave \(delay)")
    }
    if let date = HTTPDate.parse(text, now: now) {
        precondition(date.timeIntervalSince1970.isFinite, "HTTP date \(text.debugDescription) gave \(date)")
    }
    return 0
}
