import Foundation

@testable import APIManagerKit

/// Cache files, as another process or a damaged disk could leave them: the decoder never crashes,
/// and whatever it accepts has a finite date and a plausible status, and survives a round trip.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheFile(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(UnsafeRawBufferPointer(start: start, count: count))
    guard let entry = try? DiskCacheTier.decode(data) else { return 0 }
    precondition(entry.storedAt.timeIntervalSince1970.isFinite, "accepted a non-finite date")
    precondition((100...999).contains(entry.response.statusCode), "accepted status \(entry.response.statusCode)")
    guard let again = try? DiskCacheTier.decode(DiskCacheTier.encode(entry)) else {
        preconditionFailure("an accepted entry does not survive a round trip")
    }
    precondition(again.key == entry.key && again.response.body == entry.response.body, "round trip changed the entry")
    return 0
}
