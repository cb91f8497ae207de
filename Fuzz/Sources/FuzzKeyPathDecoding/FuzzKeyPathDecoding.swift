import Foundation

@testable import APIManagerKit

struct Name: APIResponse, Decodable {
    static let keyPath: String? = "data.items.0.name"
    let value: String
    init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(String.self) }
}

struct Numbers: APIResponse, Decodable {
    static let keyPath: String? = "result.2"
    let values: [Int]
    init(from decoder: any Decoder) throws { values = try decoder.singleValueContainer().decode([Int].self) }
}

struct Envelope: APIResponse, Decodable {
    static let keyPath: String? = "a..b"
    let value: APIValue
    init(from decoder: any Decoder) throws { value = try APIValue(from: decoder) }
}

/// JSON bodies decoded at a key path: never a crash; a failure is a `DecodingError` whose text the
/// error sentence can describe.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeyPathDecoding(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(UnsafeRawBufferPointer(start: start, count: count))
    let decoder = JSONDecoder()
    for attempt in [
        { _ = try decoder.decode(KeyPathDecoded<Name>.self, from: data) },
        { _ = try decoder.decode(KeyPathDecoded<Numbers>.self, from: data) },
        { _ = try decoder.decode(KeyPathDecoded<Envelope>.self, from: data) },
    ] as [() throws -> Void] {
        do {
            try attempt()
        } catch let error as DecodingError {
            _ = APIError.describe(error)
        } catch {
            preconditionFailure("not a DecodingError: \(error)")
        }
    }
    return 0
}
