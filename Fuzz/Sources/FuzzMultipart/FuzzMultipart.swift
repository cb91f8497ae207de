import APIManagerKit
import Foundation

/// Random names, file names and contents (which may hold the boundary) through the multipart
/// encoder: never a crash; a name or file name with CR, LF, a quote or another control character is
/// an `invalidRequest`, and so is a given boundary found in the content; anything else is written
/// as parts that split back, one per part appended, each with its own content, and headers in ASCII
/// but for the field names.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var bytes = ArraySlice(UnsafeRawBufferPointer(start: start, count: count))
    func byte() -> UInt8 { bytes.popFirst() ?? 0 }
    func text() -> String {
        let length = Int(byte() % 16)
        let taken = bytes.prefix(length)
        bytes = bytes.dropFirst(length)
        return String(decoding: taken, as: UTF8.self)
    }
    let givenBoundary = byte() & 1 == 0
    var form: APIMultipartFormData
    if givenBoundary {
        guard let given = try? APIMultipartFormData(boundary: "fz" + text().filter { $0.isLetter && $0.isASCII }) else {
            return 0
        }
        form = given
    } else {
        form = APIMultipartFormData()
    }
    var expected: [Data] = []
    for _ in 0..<Int(byte() % 4) {
        let name = text()
        let content = Data(text().utf8) + (byte() & 1 == 0 ? Data("--\(form.boundary)".utf8) : Data())
        let refused = name.unicodeScalars.contains { $0 == "\"" || $0.value < 0x20 || $0.value == 0x7F }
        do {
            if byte() & 1 == 0 {
                try form.append(String(decoding: content, as: UTF8.self), name: name)
                expected.append(Data(String(decoding: content, as: UTF8.self).utf8))
            } else {
                let fileName = text()
                let badFile = fileName.unicodeScalars.contains { $0 == "\"" || $0.value < 0x20 || $0.value == 0x7F }
                do {
                    try form.append(APIFile(data: content, fileName: fileName), name: name)
                    precondition(!badFile, "file name \(fileName.debugDescription) accepted")
                    expected.append(content)
                } catch {
                    precondition(badFile || refused, "file name \(fileName.debugDescription) refused")
                    continue
                }
            }
            precondition(!refused, "name \(name.debugDescription) accepted")
        } catch {
            precondition(refused, "name \(name.debugDescription) refused: \(error)")
        }
    }
    let body: Data
    do {
        body = try form.encoded()
    } catch {
        guard case .invalidRequest = error, givenBoundary else { preconditionFailure("unexpected \(error)") }
        return 0
    }
    // Split on the delimiter: every part's content comes back whole.
    let delimiter = Data("\r\n--\(form.boundary)".utf8)
    var rest = Data("\r\n".utf8) + body
    var contents: [Data] = []
    while let range = rest.range(of: delimiter) {
        let part = rest[rest.startIndex..<range.lowerBound]
        if !part.isEmpty, let split = part.range(of: Data("\r\n\r\n".utf8)) {
            let headers = part[part.startIndex..<split.lowerBound]
            for line in headers.split(separator: UInt8(ascii: "\n")) {
                precondition(!line.dropLast().contains(UInt8(ascii: "\r")), "a CR inside a header line")
            }
            contents.append(Data(part[split.upperBound...]))
        }
        rest = Data(rest[range.upperBound...])
    }
    precondition(rest == Data("--\r\n".utf8), "the body does not end with the closing delimiter")
    precondition(contents == expected, "the parts do not split back to what was appended")
    return 0
}
