import APIManagerKit
import Foundation

/// Builds a parameter value from bytes: a small, total reader (any byte string is some value).
struct ValueReader {
    var bytes: ArraySlice<UInt8>

    mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

    mutating func text() -> String {
        let length = Int(byte() % 12)
        let taken = bytes.prefix(length)
        bytes = bytes.dropFirst(length)
        return String(decoding: taken, as: UTF8.self)
    }

    mutating func value(depth: Int = 0) -> APIValue {
        switch byte() % (depth > 3 ? 5 : 7) {
        case 0: return .string(text())
        case 1: return .int(Int(Int8(bitPattern: byte())) * Int(byte()))
        case 2:
            let specials: [Double] = [.nan, .infinity, -.infinity, 0, -0.0, 1e308, 5e-324, 0.1]
            let raw = byte()
            return .double(raw < 64 ? specials[Int(raw) % specials.count] : Double(Int8(bitPattern: raw)) / 7)
        case 3: return .bool(byte() & 1 == 0)
        case 4: return .null
        case 5: return .array((0..<Int(byte() % 4)).map { _ in value(depth: depth + 1) })
        default:
            var members: [String: APIValue] = [:]
            for _ in 0..<Int(byte() % 4) { members[text()] = value(depth: depth + 1) }
            return .object(members)
        }
    }
}

private let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%=&".utf8)

/// Random values through every query encoding and the form body: never a crash; a result holds
/// only percent-encoded pairs; a NaN or infinity is an `invalidRequest`, never an empty value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQueryEncoding(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var reader = ValueReader(bytes: ArraySlice(UnsafeRawBufferPointer(start: start, count: count)))
    var parameters: [String: APIValue] = [:]
    for _ in 0..<Int(reader.byte() % 5) { parameters[reader.text()] = reader.value() }
    for arrays in [APIParameters.QueryEncoding.ArrayEncoding.brackets, .repeatedKey, .indexed] {
        for bools in [APIParameters.QueryEncoding.BoolEncoding.literal, .numeric] {
            for nulls in [APIParameters.QueryEncoding.NullEncoding.dropKey, .emptyValue, .keyOnly] {
                let encoding = APIParameters.QueryEncoding(arrays: arrays, bools: bools, nulls: nulls)
                do {
                    let query = try encoding.encode(parameters)
                    precondition(query.utf8.allSatisfy(allowed.contains), "unescaped character in \(query)")
                } catch {
                    guard case .invalidRequest = error else { preconditionFailure("unexpected \(error)") }
                }
                do {
                    _ = try APIParameters.BodyEncoding.form(encoding).body(for: .object(parameters))
                } catch {
                    guard case .invalidRequest = error else { preconditionFailure("unexpected \(error)") }
                }
            }
        }
    }
    return 0
}
