import APIManagerKit
import Foundation

/// Error bodies from a server: the message finder never crashes, and a message is never empty.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerMessage(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let contentType = bytes.first.map { $0 & 1 == 0 ? "application/json" : "text/plain; charset=utf-8" }
    let response = APIRawResponse(
        statusCode: 422, headers: contentType.map { ["Content-Type": $0] } ?? [:], body: Data(bytes))
    if let message = APIRawResponse.ServerMessage.find(in: response) {
        precondition(!message.isEmpty, "an empty message was found")
    }
    _ = APIError.unacceptableStatus(response, message: nil).description
    return 0
}
