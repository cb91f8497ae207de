import APIManagerKit
import Foundation

private let file = FileManager.default.temporaryDirectory
    .appendingPathComponent("APIManagerKitFuzz-credentials-\(ProcessInfo.processInfo.processIdentifier).json")

/// The credential store's file, as a damaged disk or another program could leave it: loading never
/// crashes, and an unreadable file starts the store empty and usable.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCredentialStore(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(UnsafeRawBufferPointer(start: start, count: count))
    guard (try? data.write(to: file)) != nil else { return 0 }
    let store = APIAuthentication.FileCredentialStore(fileURL: file)
    let origin = "https://api.test"
    _ = store.headers(forOrigin: origin)
    store.save(["access-token": "t"], forOrigin: origin)
    precondition(store.headers(forOrigin: origin)["access-token"] == "t", "a saved header was lost")
    return 0
}
