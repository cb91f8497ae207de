import APIManagerKit
import Foundation

/// Random bodies through the JSON Lines splitter: never a crash; the lines do not depend on how the
/// body is cut into chunks (the first byte says where); no line holds a line feed or is blank.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONLines(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: start, count: count))
    guard let first = bytes.first else { return 0 }
    let body = bytes.dropFirst()
    let split = body.isEmpty ? 0 : Int(first) % (body.count + 1)
    var whole = APIByteStream.JSONLinesSplitter(maxLineLength: 128)
    var cut = APIByteStream.JSONLinesSplitter(maxLineLength: 128)
    let lines: [Data]
    do {
        lines = try whole.split(Data(body)) + whole.finish()
    } catch {
        guard case .invalidRequest = error else { preconditionFailure("unexpected \(error)") }
        return 0
    }
    do {
        let cutLines = try cut.split(Data(body.prefix(split))) + cut.split(Data(body.dropFirst(split))) + cut.finish()
        precondition(cutLines == lines, "chunking changed the lines")
    } catch {
        preconditionFailure("the cut body failed where the whole did not: \(error)")
    }
    precondition(lines.allSatisfy { !$0.contains(0x0A) && !$0.allSatisfy { $0 == 0x20 || $0 == 0x09 } })
    return 0
}
