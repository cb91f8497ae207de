import Foundation

@testable import APIManagerKit

/// Loosely typed JSON from a server, mapped at several key paths into every supported type: never a
/// crash, and every failure names a key path under the one asked for.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLenientMapping(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    guard let map = try? APIMap(json: data) else { return 0 }
    for path in ["", "a", "a.b", "0", "a.0.b", "data.items"] {
        func check<Value: APILenientValue>(_ type: Value.Type, format: APIMap.DateFormat = .automatic) {
            do {
                _ = try map.value(path, as: type, dateFormat: format)
            } catch {
                precondition(error.keyPath.hasPrefix(path), "\(error) is not under \(path)")
            }
        }
        check(Bool.self)
        check(Int?.self)
        check([Double].self)
        check(String.self)
        check(URL.self)
        check(Date.self)
        check(Date.self, format: .pattern("yyyy-MM-dd'T'HH:mm:ss.SXXX"))
        check([[String?]].self)
        // The input's first bytes as a pattern too: no pattern may crash (a run of 19 letters did).
        check(Date.self, format: .pattern(String(decoding: data.prefix(48), as: UTF8.self)))
        if case .double(let double)? = APIMap.lookUp(path, in: map.root), double.isNaN {
            // A number out of every type's range fits none of them.
            precondition((try? map.value(path, as: Int.self)) == nil, "an out-of-range number became an Int")
            precondition((try? map.value(path, as: Double.self)) == nil, "an out-of-range number became a Double")
        }
    }
    return 0
}
