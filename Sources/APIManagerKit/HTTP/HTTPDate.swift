import Foundation

/// Parses the three date formats of RFC 9110 §5.6.7, by hand: Foundation's `DateFormatter` on
/// Linux stops the process with an assertion on some malformed inputs (found by `FuzzRetryAfter`),
/// and a server's header must never do that.
///
/// - IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
/// - obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`; its two-digit year is the latest year with
///   those digits that is not more than 50 years after `now` (RFC 9110 §5.6.7)
/// - asctime: `Sun Nov  6 08:49:37 1994`
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// - Parameter now: the date that an RFC 850 date's two-digit year is read relative to.
    static func parse(_ string: String, now: Date) -> Date? {
        guard string.utf8.count <= 64, string.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        let tokens = string.lowercased().split(separator: " ")
        switch tokens.count {
        case 6:  // IMF-fixdate
            guard let weekday = tokens[0].dropLastIfComma(), shortDays.contains(weekday), tokens[5] == "gmt",
                let day = number(tokens[1], digits: 2...2), let month = month(tokens[2]),
                let year = number(tokens[3], digits: 4...4)
            else { return nil }
            return date(year: year, month: month, day: day, time: tokens[4])
        case 4:  // RFC 850
            let parts = tokens[1].split(separator: "-", omittingEmptySubsequences: false)
            guard let weekday = tokens[0].dropLastIfComma(), longDays.contains(weekday), tokens[3] == "gmt",
                parts.count == 3, let day = number(parts[0], digits: 2...2), let month = month(parts[1]),
                let shortYear = number(parts[2], digits: 2...2)
            else { return nil }
            return rfc850Date(shortYear: shortYear, month: month, day: day, time: tokens[2], now: now)
        case 5:  // asctime
            guard shortDays.contains(String(tokens[0])), let month = month(tokens[1]),
                let day = number(tokens[2], digits: 1...2), let year = number(tokens[4], digits: 4...4)
            else { return nil }
            return date(year: year, month: month, day: day, time: tokens[3])
        default:
            return nil
        }
    }

    /// Fifty years of 365.2425 days, in seconds.
    private static let fiftyYears: TimeInterval = 50 * 365.2425 * 86_400

    /// The latest date with the two-digit year that is not more than 50 years after `now`: "a
    /// timestamp that appears to be more than 50 years in the future" is "the most recent year in
    /// the past that had the same last two digits". So, read in 2026, `60` is 2060 and `77` is 1977.
    private static func rfc850Date(shortYear: Int, month: Int, day: Int, time: Substring, now: Date) -> Date? {
        let seconds = now.timeIntervalSince1970
        guard seconds.isFinite, abs(seconds) < 1e12 else { return nil }
        let currentYear = year(ofDaysSinceEpoch: Int((seconds / 86_400).rounded(.down)))
        let century = currentYear - ((currentYear % 100) + 100) % 100
        for year in [century + 100 + shortYear, century + shortYear, century - 100 + shortYear] {
            // A date that does not exist that year (29 February) is tried a century earlier.
            if let date = date(year: year, month: month, day: day, time: time),
                date.timeIntervalSince(now) <= fiftyYears
            {
                return date
            }
        }
        return nil
    }

    /// The proleptic Gregorian year of a day counted from 1970-01-01 (H. Hinnant's
    /// `civil_from_days`).
    private static func year(ofDaysSinceEpoch days: Int) -> Int {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        return yearOfEra + era * 400 + (monthIndex >= 10 ? 1 : 0)
    }

    private static func month(_ token: Substring) -> Int? {
        months.firstIndex(of: String(token)).map { $0 + 1 }
    }

    private static func number(_ token: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(token.utf8.count), token.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int(token)
    }

    /// `HH:MM:SS` on the given day, in GMT; `nil` for a field out of range or a day the month lacks.
    private static func date(year: Int, month: Int, day: Int, time: Substring) -> Date? {
        let fields = time.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 3, let hour = number(fields[0], digits: 2...2),
            let minute = number(fields[1], digits: 2...2), let second = number(fields[2], digits: 2...2),
            hour < 24, minute < 60, second <= 60, year >= 1, day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar (H. Hinnant's
    /// `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Substring {
    /// The token without its trailing comma, or `nil` when it has none.
    fileprivate func dropLastIfComma() -> String? {
        hasSuffix(",") ? String(dropLast()) : nil
    }
}
