import Foundation

/// Decodes `Value` at `Value.keyPath` inside the body, walking the decoder's containers so that a
/// failure keeps its full coding path (`data.items[0].name`).
struct KeyPathDecoded<Value: APIResponse & Decodable>: Decodable {
    let value: Value

    init(from decoder: any Decoder) throws {
        var current: any Decoder = decoder
        for component in (Value.keyPath ?? "").split(separator: ".", omittingEmptySubsequences: false) {
            let name = String(component)
            if let index = Int(name), index >= 0, var array = try? current.unkeyedContainer() {
                guard (array.count ?? 0) > index else {
                    throw DecodingError.valueNotFound(
                        Value.self,
                        .init(
                            codingPath: current.codingPath + [AnyKey(intValue: index)],
                            debugDescription:
                                "The array has \(array.count ?? 0) elements; key path index \(index) is out of range."))
                }
                for _ in 0..<index { _ = try array.decode(Skipped.self) }
                current = try array.superDecoder()
            } else {
                let object = try current.container(keyedBy: AnyKey.self)
                let key = AnyKey(stringValue: name)
                guard object.contains(key) else {
                    throw DecodingError.keyNotFound(
                        key,
                        .init(
                            codingPath: current.codingPath,
                            debugDescription:
                                "The key path \"\(Value.keyPath ?? "")\" names \"\(name)\", which is absent."))
                }
                current = try object.superDecoder(forKey: key)
            }
        }
        value = try Value(from: current)
    }
}

/// Consumes one element of an unkeyed container, whatever it is.
private struct Skipped: Decodable {
    init(from decoder: any Decoder) throws {}
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}
