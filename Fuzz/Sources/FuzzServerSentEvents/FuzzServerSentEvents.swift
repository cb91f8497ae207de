import APIManagerKit
import Foundation

/// Random event streams: never a crash; the events do not depend on how the stream is cut into
/// chunks (the first byte says where); no event's type is empty; a limit is an `invalidRequest`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerSentEvents(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: start, count: count))
    guard let first = bytes.first else { return 0 }
    let stream = bytes.dropFirst()
    let split = stream.isEmpty ? 0 : Int(first) % (stream.count + 1)
    var whole = APIServerSentEvent.Parser(maxLineLength: 256, maxEventLength: 1024)
    var cut = APIServerSentEvent.Parser(maxLineLength: 256, maxEventLength: 1024)
    let wholeEvents: [APIServerSentEvent]
    do {
        wholeEvents = try whole.parse(Data(stream))
    } catch {
        guard case .invalidRequest = error else { preconditionFailure("unexpected \(error)") }
        return 0
    }
    do {
        let events = try cut.parse(Data(stream.prefix(split))) + cut.parse(Data(stream.dropFirst(split)))
        precondition(events == wholeEvents, "chunking changed the events")
        precondition(cut.lastEventID == whole.lastEventID && cut.reconnectionTime == whole.reconnectionTime)
    } catch {
        preconditionFailure("the cut stream failed where the whole did not: \(error)")
    }
    precondition(wholeEvents.allSatisfy { !$0.type.isEmpty })
    return 0
}
