import Foundation

extension APIMap {
    /// How a mapping reads a date.
    public enum DateFormat: Sendable, Hashable, CustomStringConvertible {
        /// An ISO 8601 string (`2026-11-23T10:00:00Z`, with or without fractional seconds, any offset),
        /// or a Unix timestamp as a number or numeric string: in seconds, or in milliseconds when it is
        /// above 100,000,000,000 (after March 1973 in milliseconds, year 5138 in seconds).
        case automatic
        /// An ISO 8601 string only.
        case iso8601
        /// A Unix timestamp in seconds, as a number or numeric string.
        case secondsSince1970
        /// A Unix timestamp in milliseconds, as a number or numeric string.
        case millisecondsSince1970
        /// A string in a fixed pattern, read in UTC unless it has a zone: `yyyy` (year), `MM`/`M`
        /// (month), `dd`/`d` (day), `HH`/`H` (hour), `mm`/`m` (minute), `ss`/`s` (second), `S…`
        /// (fraction digits), `Z` or `XXX` (zone: `Z`, `+hh:mm`, `+hhmm`); any other character must
        /// appear as it is, and text in single quotes is literal (`"dd.MM.yyyy HH:mm"`,
        /// `"yyyy-MM-dd'T'HH:mm:ssZ"`). Parsed by this package, never by `DateFormatter` (which stops
        /// the process on some malformed input on Linux). A pattern with a run of more than 9 of the
        /// field letters (`yyyyyyyyyy`), longer than 128 bytes, or with a quote that never closes reads
        /// no date: mapping fails with an ``APIMappingError`` that names the pattern's fault.
        case pattern(String)

        public var description: String {
            switch self {
            case .automatic: return "a date (ISO 8601 or a Unix timestamp)"
            case .iso8601: return "an ISO 8601 date"
            case .secondsSince1970: return "a Unix timestamp in seconds"
            case .millisecondsSince1970: return "a Unix timestamp in milliseconds"
            case .pattern(let pattern): return "a date like \(pattern.debugDescription)"
            }
        }

        /// The date `value` holds in this format; `nil` when it holds none.
        func date(from value: APIValue) -> Date? {
            switch self {
            case .automatic:
                if case .string(let text) = value, let date = Self.iso8601(text) { return date }
                guard let number = Self.number(value) else { return nil }
                return Self.timestamp(abs(number) > 100_000_000_000 ? number / 1_000 : number)
            case .iso8601:
                guard case .string(let text) = value else { return nil }
                return Self.iso8601(text)
            case .secondsSince1970:
                return Self.number(value).flatMap(Self.timestamp)
            case .millisecondsSince1970:
                return Self.number(value).flatMap { Self.timestamp($0 / 1_000) }
            case .pattern(let pattern):
                guard case .string(let text) = value else { return nil }
                return DatePattern.parse(text, pattern: pattern)
            }
        }

        private static func number(_ value: APIValue) -> Double? {
            switch value {
            case .int(let int): return Double(int)
            case .double(let double): return double.isFinite ? double : nil
            case .string(let text): return LenientNumber.double(text.trimmingCharacters(in: .whitespaces))
            default: return nil
            }
        }

        /// A date for a number of seconds since 1970, within ±10,000 years.
        private static func timestamp(_ seconds: Double) -> Date? {
            guard seconds.isFinite, abs(seconds) < 315_569_260_000 else { return nil }
            return Date(timeIntervalSince1970: seconds)
        }

        private static func iso8601(_ text: String) -> Date? {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            guard trimmed.utf8.count <= 64, trimmed.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
            for pattern in [
                "yyyy-MM-dd'T'HH:mm:ss.SXXX", "yyyy-MM-dd'T'HH:mm:ssXXX", "yyyy-MM-dd'T'HH:mmXXX", "yyyy-MM-dd",
            ] {
                if let date = DatePattern.parse(trimmed, pattern: pattern) { return date }
            }
            return nil
        }
    }
}

/// Reads a date in a fixed pattern by hand (see ``APIMap/DateFormat/pattern(_:)``).
enum DatePattern {
    /// The most letters in a run of a field letter: a field of more digits is no date.
    static let longestRun = 9

    /// Why `pattern` can read no date; `nil` when it is a usable pattern.
    static func fault(in pattern: String) -> String? {
        let bytes = Array(pattern.utf8)
        guard bytes.count <= 128 else { return "it is longer than 128 bytes" }
        var index = 0
        while index < bytes.count {
            let letter = bytes[index]
            if letter == UInt8(ascii: "'") {
                guard let close = bytes[(index + 1)...].firstIndex(of: UInt8(ascii: "'")) else {
                    return "a quote never closes"
                }
                index = close + 1
                continue
            }
            var run = 1
            while index + run < bytes.count && bytes[index + run] == letter { run += 1 }
            if "yMdHmsS".utf8.contains(letter) && run > longestRun {
                return "a run of \(run) '\(Character(Unicode.Scalar(letter)))' (at most \(longestRun))"
            }
            index += run
        }
        return nil
    }

    static func parse(_ text: String, pattern: String) -> Date? {
        let input = Array(text.utf8)
        guard input.count <= 128, fault(in: pattern) == nil else { return nil }
        let pattern = Array(pattern.utf8)
        var fields: [UInt8: Int] = [:]
        var fraction = 0.0
        var offset = 0
        var position = 0
        var index = 0
        while index < pattern.count {
            let letter = pattern[index]
            if letter == UInt8(ascii: "'") {
                index += 1
                while index < pattern.count && pattern[index] != UInt8(ascii: "'") {
                    guard position < input.count, input[position] == pattern[index] else { return nil }
                    position += 1
                    index += 1
                }
                index += 1
                continue
            }
            var run = 1
            while index + run < pattern.count && pattern[index + run] == letter { run += 1 }
            index += run
            switch letter {
            case UInt8(ascii: "y"), UInt8(ascii: "M"), UInt8(ascii: "d"), UInt8(ascii: "H"), UInt8(ascii: "m"),
                UInt8(ascii: "s"):
                // A run of one or two letters takes one or two digits; a longer run exactly that many.
                let maximum = run <= 2 && letter != UInt8(ascii: "y") ? 2 : max(run, 4)
                let minimum = run <= 2 ? 1 : run
                guard let (number, length) = digits(input, from: position, minimum: minimum, maximum: maximum) else {
                    return nil
                }
                fields[letter] = number
                position += length
            case UInt8(ascii: "S"):
                guard let (number, length) = digits(input, from: position, minimum: 1, maximum: 9) else { return nil }
                fraction = Double(number) / pow(10, Double(length))
                position += length
            case UInt8(ascii: "Z"), UInt8(ascii: "X"):
                guard let (seconds, length) = zone(input, from: position) else { return nil }
                offset = seconds
                position += length
            default:
                for _ in 0..<run {
                    guard position < input.count, input[position] == letter else { return nil }
                    position += 1
                }
            }
        }
        guard position == input.count, let year = fields[UInt8(ascii: "y")] else { return nil }
        var components = DateComponents()
        components.year = year
        components.month = fields[UInt8(ascii: "M")] ?? 1
        components.day = fields[UInt8(ascii: "d")] ?? 1
        components.hour = fields[UInt8(ascii: "H")] ?? 0
        components.minute = fields[UInt8(ascii: "m")] ?? 0
        components.second = fields[UInt8(ascii: "s")] ?? 0
        guard (1...12).contains(components.month ?? 0), (1...31).contains(components.day ?? 0),
            (0...23).contains(components.hour ?? 0), (0...59).contains(components.minute ?? 0),
            (0...60).contains(components.second ?? 0), (1...9999).contains(year)
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        guard let utc = TimeZone(identifier: "UTC") else { return nil }
        calendar.timeZone = utc
        guard let date = calendar.date(from: components),
            calendar.component(.day, from: date) == components.day  // 31 February is refused
        else { return nil }
        return date.addingTimeInterval(fraction - Double(offset))
    }

    /// At most `maximum` digits (never more than 18, so the value fits an `Int`).
    private static func digits(_ input: [UInt8], from start: Int, minimum: Int, maximum: Int) -> (Int, Int)? {
        var value = 0
        var length = 0
        while start + length < input.count, length < min(maximum, 18),
            let digit = Int(exactly: input[start + length]).map({ $0 - 48 }), (0...9).contains(digit)
        {
            value = value * 10 + digit
            length += 1
        }
        return length >= minimum ? (value, length) : nil
    }

    /// `Z`, `+hh:mm`, `+hhmm` or `+hh`, as seconds east of UTC.
    private static func zone(_ input: [UInt8], from start: Int) -> (Int, Int)? {
        guard start < input.count else { return nil }
        if input[start] == UInt8(ascii: "Z") || input[start] == UInt8(ascii: "z") { return (0, 1) }
        guard input[start] == UInt8(ascii: "+") || input[start] == UInt8(ascii: "-") else { return nil }
        let sign = input[start] == UInt8(ascii: "-") ? -1 : 1
        guard let (hours, hourLength) = digits(input, from: start + 1, minimum: 2, maximum: 2), hours <= 23 else {
            return nil
        }
        var length = 1 + hourLength
        var minutes = 0
        if start + length < input.count, input[start + length] == UInt8(ascii: ":") { length += 1 }
        if let (parsed, minuteLength) = digits(input, from: start + length, minimum: 2, maximum: 2), parsed <= 59 {
            minutes = parsed
            length += minuteLength
        }
        return (sign * (hours * 3600 + minutes * 60), length)
    }
}
