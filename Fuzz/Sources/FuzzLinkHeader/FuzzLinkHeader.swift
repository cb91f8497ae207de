import Foundation

@testable import APIManagerKit

/// `Link` header values from a server: never a crash, every link has an absolute target, and
/// relation types are lower-cased and not empty.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLinkHeader(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    for link in APILink.parse(text, relativeTo: URL(string: "https://base.test/items?page=1")) {
        precondition(link.target.scheme != nil, "\(text.debugDescription) gave a relative target")
        precondition(
            link.relations.allSatisfy { !$0.isEmpty && $0 == $0.lowercased() },
            "\(text.debugDescription) gave relations \(link.relations)")
    }
    return 0
}
