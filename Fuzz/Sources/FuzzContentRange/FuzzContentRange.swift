import Foundation

@testable import APIManagerKit

/// A `206`'s `Content-Range` (and the validators beside it) from a server: never a crash; a range
/// that is accepted is one RFC 9110 §14.4 allows to be combined (`first` ≤ `last` < complete
/// length), and written back it reads the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentRange(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    if let range = ContentRange(text) {
        precondition(range.first >= 0 && range.first <= range.last, "\(text.debugDescription): \(range)")
        if let complete = range.completeLength {
            precondition(range.last < complete, "\(text.debugDescription): last past the complete length")
        }
        let written = "bytes \(range.first)-\(range.last)/\(range.completeLength.map(String.init) ?? "*")"
        precondition(ContentRange(written) == range, "\(text.debugDescription) does not read back")
        precondition(APIResponseBodyFile.contentRangeStart(text) == range.first)
    } else {
        precondition(APIResponseBodyFile.contentRangeStart(text) == nil)
    }
    // The same bytes as validators: an ETag, a Last-Modified and a Date.
    let lines = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
    let validator = APIResponseBodyFile.validator(
        etag: lines.first, lastModified: lines.dropFirst().first, date: lines.dropFirst(2).first)
    if let validator, !validator.hasPrefix("\"") {
        precondition(validator.trimmingCharacters(in: .whitespaces) == validator, "a date is kept trimmed")
    }
    if let range = ContentRange(lines.last ?? "") {
        let record = ResumeRecord(url: nil, validator: lines.first, completeLength: range.completeLength)
        _ = TransferMachine.isAnotherVersion(
            sent: record, answered: ["ETag": lines.dropFirst().first ?? "", "Last-Modified": text], range: range)
    }
    return 0
}
