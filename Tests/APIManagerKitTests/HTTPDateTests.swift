import Foundation
import Testing

@testable import APIManagerKit

/// `Retry-After` dates, parsed without `DateFormatter` (which stops the process on some inputs on
/// Linux).
@Suite("HTTP dates and Retry-After")
struct HTTPDateTests {
    static let now = Date(timeIntervalSince1970: 784_111_000)  // 1994-11-06 08:36:40 GMT

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "sun, 06 nov 1994 08:49:37 gmt",
    ])
    func theThreeFormatsGiveTheSameInstant(value: String) {
        #expect(APIRetryPolicy.retryAfterDelay(value, now: Self.now) == 777)
    }

    @Test(arguments: [
        "Sun, 30 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1994 08:49:37 PST", "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT extra", "", "S\u{DC}\u{B1}\u{90}:9:7 9", "Sun Nov 06 08:49:37 94",
    ])
    func malformedDatesAreNotDates(value: String) {
        #expect(APIRetryPolicy.retryAfterDelay(value, now: Self.now) == nil)
    }

    /// The input `FuzzRetryAfter` found: Foundation's `DateFormatter` asserted on it on Linux.
    @Test func theFuzzersCrashingInputIsNotADate() {
        let bytes: [UInt8] = [0x53, 0xdc, 0xb1, 0x90, 0x89, 0xdf, 0xc9, 0xdf, 0xc7, 0x3a, 0x39, 0x3a, 0x37, 0x20, 0x39]
        #expect(APIRetryPolicy.retryAfterDelay(String(decoding: bytes, as: UTF8.self), now: Self.now) == nil)
    }

    @Test func aTwoDigitYearBelow50IsThisCentury() {
        let delay = APIRetryPolicy.retryAfterDelay("Monday, 01-Jan-35 00:00:00 GMT", now: Self.now)
        #expect(delay == Date(timeIntervalSince1970: 2_051_222_400).timeIntervalSince(Self.now))
    }

    /// RFC 9110 §5.6.7 (and Go's and CPython's date tests): a two-digit year more than 50 years
    /// ahead of now is the most recent past year with those digits; otherwise this century.
    @Test(
        arguments: [
            (2026, "60", 2060), (2026, "75", 2075), (2026, "77", 1977), (2026, "00", 2000), (2026, "99", 1999),
            (1994, "35", 2035), (1994, "43", 2043), (1994, "45", 1945), (2070, "19", 2119), (2070, "20", 2020),
            (2070, "21", 2021),
            (2070, "99", 2099),
        ] as [(Int, String, Int)])
    func aTwoDigitYearIsReadRelativeToNow(currentYear: Int, digits: String, expectedYear: Int) throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "GMT"))
        let now = try #require(calendar.date(from: DateComponents(year: currentYear, month: 6, day: 1)))
        let parsed = try #require(HTTPDate.parse("Sunday, 06-Nov-\(digits) 08:49:37 GMT", now: now))
        #expect(calendar.component(.year, from: parsed) == expectedYear)
    }

    /// RFC 9110 §10.2.3: `delay-seconds = 1*DIGIT`. Signs, fractions and spaces inside are refused
    /// (Python urllib3's `test_parse_retry_after` cases).
    @Test(arguments: ["+1", "-1", "1.5", "1 0", "0x10", "1e3", " +0", "١"])
    func retryAfterSecondsAreDigitsOnly(value: String) {
        #expect(APIRetryPolicy.retryAfterDelay(value, now: Self.now) == nil)
    }

    @Test func retryAfterWithTooManyDigitsIsAVeryLongWaitThatIsGivenUp() {
        let delay = APIRetryPolicy.retryAfterDelay("99999999999999999999999", now: Self.now)
        #expect(delay.map { $0 > 1e15 } == true)
        #expect(APIRetryPolicy.retryAfterDelay(" 42 ", now: Self.now) == 42)
        #expect(APIRetryPolicy.retryAfterDelay("007", now: Self.now) == 7)
    }

    @Test func leapDaysAreDates() {
        let leap = APIRetryPolicy.retryAfterDelay("Thu, 29 Feb 2024 00:00:00 GMT", now: Self.now)
        #expect(leap == Date(timeIntervalSince1970: 1_709_164_800).timeIntervalSince(Self.now))
        #expect(APIRetryPolicy.retryAfterDelay("Thu, 29 Feb 2023 00:00:00 GMT", now: Self.now) == nil)
    }
}
