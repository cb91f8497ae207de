// Multipart/form-data (issue 21, item 2) and bodies from files (item 3): the encoder alone, then
// through a manager on the mock transport.
import APIManagerKitTesting
import Foundation
import Testing

@testable import APIManagerKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The parts of a multipart body, as a server would split them: headers and content.
struct ParsedPart: Equatable {
    var headers: [String: String]
    var content: Data

    var disposition: String { headers["content-disposition"] ?? "" }
    var text: String { String(decoding: content, as: UTF8.self) }
}

func parseMultipart(_ body: Data, contentType: String?) -> [ParsedPart]? {
    guard let contentType, let range = contentType.range(of: "boundary=") else { return nil }
    let delimiter = Data("--\(contentType[range.upperBound...])".utf8)
    var parts: [ParsedPart] = []
    var rest = body[...]
    guard let first = rest.range(of: delimiter), first.lowerBound == rest.startIndex else { return nil }
    rest = rest[first.upperBound...]
    while !rest.starts(with: Data("--".utf8)) {
        guard rest.starts(with: Data("\r\n".utf8)) else { return nil }
        rest = rest.dropFirst(2)
        guard let next = rest.range(of: Data("\r\n".utf8) + delimiter) else { return nil }
        let part = rest[rest.startIndex..<next.lowerBound]
        guard let split = part.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        var headers: [String: String] = [:]
        for line in String(decoding: part[part.startIndex..<split.lowerBound], as: UTF8.self)
            .components(separatedBy: "\r\n")
        {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        parts.append(ParsedPart(headers: headers, content: Data(part[split.upperBound...])))
        rest = rest[next.upperBound...]
    }
    return rest == Data("--\r\n".utf8)[...] ? parts : nil
}

@Suite("Multipart bodies and file uploads", .serialized, .timeLimit(.minutes(1)))
struct MultipartTests {
    // MARK: The encoder

    @Test func aFormIsWrittenAsRFC7578Says() throws {
        var form = try APIMultipartFormData(boundary: "XyZ")
        try form.append("Sunset", name: "caption")
        try form.append(APIFile(data: Data([1, 2, 3]), fileName: "a.png"), name: "photo")
        let expected =
            "--XyZ\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\nSunset\r\n"
            + "--XyZ\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.png\"\r\n"
            + "Content-Type: image/png\r\n\r\n\u{1}\u{2}\u{3}\r\n--XyZ--\r\n"
        #expect(try form.encoded() == Data(expected.utf8))
        #expect(form.contentType == "multipart/form-data; boundary=XyZ")
        #expect(try form.contentLength() == Int64(expected.utf8.count))
    }

    @Test(arguments: ["a\rb", "a\nb", "a\"b", "a\u{0}b", "a\tb"])
    func namesThatCouldForgeHeadersAreRefused(name: String) throws {
        var form = APIMultipartFormData()
        #expect(throws: APIError.self) { try form.append("x", name: name) }
        #expect(throws: APIError.self) { try form.append(APIFile(data: Data(), fileName: name), name: "file") }
        #expect(form.parts.isEmpty)
    }

    @Test func nonASCIIFileNamesArePercentEncodedAsUTF8() throws {
        var form = try APIMultipartFormData(boundary: "b")
        try form.append(APIFile(data: Data("x".utf8), fileName: "café 日本.txt"), name: "naïve")
        let parts = try #require(parseMultipart(try form.encoded(), contentType: form.contentType))
        #expect(parts[0].disposition == "form-data; name=\"naïve\"; filename=\"caf%C3%A9 %E6%97%A5%E6%9C%AC.txt\"")
    }

    /// The corrections issue, item 23: once a name is percent-encoded, `%` is too.
    @Test(arguments: [
        ("é%41.txt", "%C3%A9%2541.txt"), ("100%.txt", "100%.txt"), ("naïve 50%", "na%C3%AFve 50%25"),
        ("plain.txt", "plain.txt"),
    ])
    func aPercentSignInAnEncodedFileNameIsEncodedToo(name: String, encoded: String) {
        #expect(APIMultipartFormData.encodedFileName(name) == encoded)
        if name.utf8.contains(where: { $0 >= 0x80 }) {
            #expect(encoded.removingPercentEncoding == name, "decodes back to the name")
        }
    }

    /// Item 22: RFC 9110 §5.6.6, a parameter value that is not a token is a quoted string.
    @Test(arguments: [
        ("XyZ", "XyZ"), ("a b", #""a b""#), ("a:b", #""a:b""#), ("a=b", #""a=b""#), ("a/b", #""a/b""#),
        ("a?b", #""a?b""#), ("(ab)", #""(ab)""#), ("a,b", #""a,b""#), ("a'b+c_d-e.f", "a'b+c_d-e.f"),
    ])
    func aBoundaryThatIsNotATokenIsQuotedInTheContentType(boundary: String, parameter: String) throws {
        let form = try APIMultipartFormData(boundary: boundary)
        #expect(form.contentType == "multipart/form-data; boundary=\(parameter)")
        #expect(APISecrets.multipartBoundary(form.contentType) == boundary, "read back as the same boundary")
    }

    @Test func mimeTypesComeFromTheExtensionThenTheFirstBytes() throws {
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0])
        #expect(try APIFile(data: png).resolvedMIMEType() == "image/png", "sniffed")
        #expect(try APIFile(data: Data([0xFF, 0xD8, 0xFF, 0xE0])).resolvedMIMEType() == "image/jpeg")
        #expect(try APIFile(data: Data("%PDF-1.7".utf8)).resolvedMIMEType() == "application/pdf")
        #expect(try APIFile(data: Data("hello".utf8)).resolvedMIMEType() == "application/octet-stream")
        #expect(try APIFile(data: png, fileName: "notes.TXT").resolvedMIMEType() == "text/plain", "the extension first")
        #expect(
            try APIFile(data: png, fileName: "x.png", mimeType: "image/x-mine").resolvedMIMEType() == "image/x-mine")
        #expect(try APIFile(data: png, fileName: "no-extension").resolvedMIMEType() == "image/png")
    }

    @Test func fileNameExtensionsAreReadWithoutFoundation() {
        #expect(APIFile.pathExtension(of: "a.png") == "png")
        #expect(APIFile.pathExtension(of: "dir.d/archive.tar.gz") == "gz")
        #expect(APIFile.pathExtension(of: ".hidden") == "")
        #expect(APIFile.pathExtension(of: "no-extension") == "")
        #expect(APIFile.pathExtension(of: "////+//\u{1e}\u{1e}fa\u{fffd}a") == "", "crashed Foundation's pathExtension")
        #expect(APIFile.pathExtension(of: "trailing.") == "")
    }

    @Test func aGivenBoundaryFoundInTheContentFailsTheBody() throws {
        var form = try APIMultipartFormData(boundary: "frontier")
        try form.append("this text crosses the --frontier", name: "text")
        #expect(throws: APIError.self) { try form.encoded() }
    }

    @Test func theDelimiterIsFoundAcrossChunkBorders() throws {
        var scanner = DelimiterScanner(delimiter: Data("--frontier".utf8))
        try scanner.check(Data("abc --fron".utf8))
        #expect(throws: APIError.self) { try scanner.check(Data("tier def".utf8)) }
    }

    @Test(arguments: [1, 2, 3, 9, 10, 64])
    func theDelimiterIsFoundWhateverTheChunkSize(chunkSize: Int) throws {
        for text in ["--frontier", "x--frontier", "--frontierx", "a b c --frontier d e f", "---frontier"] {
            var scanner = DelimiterScanner(delimiter: Data("--frontier".utf8))
            let bytes = Array(text.utf8)
            var found = false
            for start in stride(from: 0, to: bytes.count, by: chunkSize) where !found {
                found = (try? scanner.check(Data(bytes[start..<min(start + chunkSize, bytes.count)]))) == nil
            }
            #expect(found, "\(text.debugDescription) in chunks of \(chunkSize)")
        }
        var clean = DelimiterScanner(delimiter: Data("--frontier".utf8))
        let bytes = Array("--fronti -frontier --frontie r".utf8)
        for start in stride(from: 0, to: bytes.count, by: chunkSize) {
            try clean.check(Data(bytes[start..<min(start + chunkSize, bytes.count)]))
        }
    }

    @Test func theDelimiterSearchAgreesWithANaiveOneOnRandomBytes() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let needle = Data((0..<Int.random(in: 1...4, using: &random)).map { _ in UInt8.random(in: 0...2) })
            let hay = Data((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...2) })
            let naive =
                hay.count >= needle.count
                && (0...(hay.count - needle.count)).contains { start in
                    hay[hay.startIndex + start..<hay.startIndex + start + needle.count].elementsEqual(needle)
                }
            #expect(DelimiterScanner.contains(hay, needle) == naive, "\(Array(hay)) / \(Array(needle))")
        }
    }

    @Test func aRandomBoundaryIsUniqueToTheForm() {
        #expect(APIMultipartFormData().boundary != APIMultipartFormData().boundary)
        #expect(APIMultipartFormData().boundary.count >= 30)
    }

    @Test func nestedParametersAreNamedAsTheFormEncoderNamesThem() throws {
        let form = try APIMultipartFormData(parameters: [
            "user": ["name": "Ada", "tags": ["a", "b"]], "avatar": .file(APIFile(data: Data([0]), fileName: "a.bin")),
            "admin": true, "nothing": nil,
        ])
        #expect(
            form.parts.map { part -> String in
                switch part {
                case .text(let name, let value): return "\(name)=\(value)"
                case .file(let name, let file): return "\(name)@\(file.fileName ?? "")"
                }
            } == ["admin=true", "avatar@a.bin", "user[name]=Ada", "user[tags][]=a", "user[tags][]=b"])
    }

    @Test func aFileOnDiskIsWrittenInChunksToTheSameBytesAsInMemory() throws {
        let directory = ScratchDirectory()
        let source = directory.url.appendingPathComponent("big.bin")
        let bytes = Data((0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: source)
        var form = try APIMultipartFormData(boundary: "b0und4ry")
        try form.append(APIFile(url: source), name: "file")
        try form.append("after", name: "note")
        let inMemory = try form.encoded()
        let target = directory.url.appendingPathComponent("body")
        try form.write(to: target)
        #expect(try Data(contentsOf: target) == inMemory)
        #expect(try form.contentLength() == Int64(inMemory.count))
        let parts = try #require(parseMultipart(inMemory, contentType: form.contentType))
        #expect(parts[0].content == bytes)
        #expect(parts[0].headers["content-type"] == "application/octet-stream")
        #expect(parts[0].disposition == "form-data; name=\"file\"; filename=\"big.bin\"")
    }

    @Test func aMissingFileFailsWithATypedError() {
        var form = APIMultipartFormData()
        #expect(throws: Never.self) {
            try form.append(APIFile(url: URL(fileURLWithPath: "/nonexistent/photo.jpg")), name: "photo")
        }
        #expect {
            try form.encoded()
        } throws: { error in
            guard case .invalidRequest(let reason, _)? = error as? APIError else { return false }
            return reason.contains("photo.jpg")
        }
    }

    // MARK: Through a manager

    struct UploadRequest: APIRequest {
        var url = testBaseURL
        var path = "/upload"
        var method: HTTPMethod = .post
        var parameters: APIParameters = [:]
        var body: APIRequestBody?
        var headers: [String: String] = [:]
        var multipartInMemoryLimit = APIRequestDefaults.multipartInMemoryLimit
        var retryPolicy: APIRetryPolicy?
        var sharing: APIConcurrencyPolicy.Sharing = .never
        var concurrencyScope: String?
    }

    final class UploadManager: APIManager {
        typealias Request = UploadRequest
        typealias Response = APIRawResponse
        let engine: APIEngine
        init(engine: APIEngine) { self.engine = engine }
    }

    private func make(_ replies: MockTransport.Reply...) -> (MockTransport, UploadManager, TestClock) {
        let clock = TestClock()
        let transport = MockTransport(clock: clock)
        transport.stub(nil, "/upload", replies: replies.isEmpty ? [.status(200)] : replies)
        return (
            transport,
            UploadManager(
                engine: APIEngine(transport: transport, clock: clock, delivery: .inline, execution: .inline)),
            clock
        )
    }

    @Test(arguments: [nil, "uploads"] as [String?])
    func aFileParameterMakesTheBodyMultipart(scope: String?) throws {
        let (transport, manager, _) = make()
        let photo = Data([0xFF, 0xD8, 0xFF, 0xE0, 1, 2])
        let task = manager.send(
            UploadRequest(
                parameters: ["caption": "Sunset", "photo": .file(APIFile(data: photo, fileName: "sunset.jpg"))],
                concurrencyScope: scope))
        #expect(task.state.name == "finished")
        let request = try #require(transport.records.first?.request)
        let contentType = request.value(forHTTPHeaderField: "Content-Type")
        #expect(contentType?.hasPrefix("multipart/form-data; boundary=APIManagerKit-") == true)
        let body = try #require(request.httpBody)
        let parts = try #require(parseMultipart(body, contentType: contentType))
        #expect(
            parts.map(\.disposition) == [
                "form-data; name=\"caption\"", "form-data; name=\"photo\"; filename=\"sunset.jpg\"",
            ])
        #expect(parts[1].content == photo && parts[1].headers["content-type"] == "image/jpeg")
    }

    @Test func anExplicitContentTypeDoesNotLoseTheBoundary() throws {
        let (transport, manager, _) = make()
        manager.send(
            UploadRequest(
                parameters: ["photo": .file(APIFile(data: Data([1])))],
                headers: ["Content-Type": "multipart/form-data"]))
        let contentType = transport.records.first?.request.value(forHTTPHeaderField: "Content-Type")
        #expect(contentType?.contains("boundary=") == true)
    }

    @Test func aFileInTheQueryFailsTheRequestAndNothingIsSent() {
        let (transport, manager, _) = make()
        let task = manager.send(UploadRequest(method: .get, parameters: ["photo": .file(APIFile(data: Data([1])))]))
        #expect(task.state.name.hasPrefix("invalidRequest"))
        #expect(transport.records.isEmpty)
    }

    /// This process's spooled forms: another process's, or a killed one's that the first spool of
    /// this process sweeps away, are not counted.
    private func spooledFiles() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path))
        return (names ?? []).filter { $0.hasPrefix("APIManagerKit-body-\(getpid())-") }
    }

    @Test func aFormOverTheLimitIsStreamedFromATemporaryFileRemovedAfterwards() throws {
        try SpoolingTurns.take {
            let (transport, manager, clock) = make(.status(200).after(1))
            let bytes = Data((0..<(200 << 10)).map { UInt8(truncatingIfNeeded: $0) })
            let task = manager.send(
                UploadRequest(
                    parameters: ["file": .file(APIFile(data: bytes, fileName: "blob.bin"))],
                    multipartInMemoryLimit: 1024))
            let spooled = try #require(transport.records.first?.options.bodyFile, "written to disk, not held in memory")
            #expect(spooledFiles().contains(spooled.lastPathComponent), "a temporary file of this process")
            clock.advance(by: 1)
            #expect(task.state.name == "finished")
            let request = try #require(transport.records.first?.request)
            let recorded = request.httpBody
            let body = try #require(recorded, "the mock transport read the stream")
            #expect(request.value(forHTTPHeaderField: "Content-Length") == String(body.count))
            let parts = try #require(
                parseMultipart(body, contentType: request.value(forHTTPHeaderField: "Content-Type")))
            #expect(parts.first?.content == bytes)
            #expect(!FileManager.default.fileExists(atPath: spooled.path), "removed when the attempt ends")
            #expect(BodyFile.unclaimedCount == 0)
        }
    }

    /// Accepts body writers: records each attempt's body as its writer wrote it, and the options.
    final class WritingTransport: OptionsTransport, @unchecked Sendable {
        // @unchecked: `sent` is only touched under `lock`.
        private let lock = NSLock()
        private var sent: [(request: URLRequest, options: APITransportOptions, body: Data?)] = []
        private let failFirst: Bool
        init(failFirst: Bool = false) { self.failFirst = failFirst }
        var acceptsBodyWriters: Bool { true }
        var records: [(request: URLRequest, options: APITransportOptions, body: Data?)] { lock.withLock { sent } }
        func send(
            _ request: URLRequest, options: APITransportOptions,
            completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
        ) -> any APICancellable {
            var body: Data?
            if let writer = options.bodyWriter {
                var written = Data()
                try? writer.write { written.append($0) }
                body = written
            }
            let count = lock.withLock {
                sent.append((request, options, body))
                return sent.count
            }
            completion(
                failFirst && count == 1
                    ? .failure(URLError(.networkConnectionLost)) : .success(APIRawResponse(statusCode: 200)))
            return NothingToCancel()
        }
    }

    @Test(arguments: [nil, "uploads"] as [String?])
    func aTransportThatAcceptsBodyWritersGetsALargeFormUnwritten(scope: String?) throws {
        try SpoolingTurns.take {
            let transport = WritingTransport(failFirst: true)
            let manager = UploadManager(engine: APIEngine(transport: transport, delivery: .inline, execution: .inline))
            let before = spooledFiles()
            let directory = ScratchDirectory()
            let file = directory.url.appendingPathComponent("clip.bin")
            let bytes = Data((0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try bytes.write(to: file)
            let task = manager.send(
                UploadRequest(
                    method: .put, parameters: ["title": "clip", "clip": .file(APIFile(url: file))],
                    multipartInMemoryLimit: 1024,
                    retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 0, jitter: .none),
                    concurrencyScope: scope))
            #expect(task.state.name == "finished")
            #expect(Set(spooledFiles()).subtracting(before).isEmpty, "never written to a temporary file")
            let records = transport.records
            #expect(records.count == 2)
            for record in records {
                #expect(record.options.bodyFile == nil)
                let body = try #require(record.body, "the body came as a writer")
                #expect(record.request.value(forHTTPHeaderField: "Content-Length") == String(body.count))
                #expect(record.options.bodyWriter?.length == Int64(body.count))
                let parts = try #require(
                    parseMultipart(body, contentType: record.request.value(forHTTPHeaderField: "Content-Type")))
                #expect(parts.map(\.content) == [bytes, Data("clip".utf8)], "whole, on every attempt")
            }
            #expect(BodyFile.unclaimedCount == 0)
        }
    }

    @Test func aWriterForAFileThatIsGoneThrowsATypedError() throws {
        let directory = ScratchDirectory()
        let file = directory.url.appendingPathComponent("gone.bin")
        try Data(count: 10).write(to: file)
        var form = APIMultipartFormData()
        try form.append(APIFile(url: file), name: "file")
        let writer = APIRequestBody.Writer(form: form, length: try form.contentLength())
        try FileManager.default.removeItem(at: file)
        #expect(throws: APIError.self) { try writer.write { _ in } }
    }

    @Test func aWriterPassesTheSinksOwnErrorOn() throws {
        struct Closed: Error {}
        var form = APIMultipartFormData()
        try form.append("value", name: "field")
        let writer = APIRequestBody.Writer(form: form, length: try form.contentLength())
        #expect(throws: Closed.self) { try writer.write { _ in throw Closed() } }
    }

    @Test func aCancelledUploadRemovesItsTemporaryFile() {
        SpoolingTurns.take {
            let (transport, manager, _) = make(MockTransport.Reply.status(200).held())
            let task = manager.send(
                UploadRequest(
                    parameters: ["file": .file(APIFile(data: Data(count: 4096)))], multipartInMemoryLimit: 1024))
            let spooled = transport.records.first?.options.bodyFile
            #expect(spooled.map { FileManager.default.fileExists(atPath: $0.path) } == true)
            task.cancel()
            #expect(spooled.map { FileManager.default.fileExists(atPath: $0.path) } == false)
        }
    }

    @Test func aRetryStreamsTheWholeBodyAgain() throws {
        let (transport, manager, clock) = make(.status(503), .status(200))
        let directory = ScratchDirectory()
        let file = directory.url.appendingPathComponent("report.csv")
        try Data("a,b\n1,2\n".utf8).write(to: file)
        let task = manager.send(
            UploadRequest(
                body: .file(file),
                retryPolicy: APIRetryPolicy(
                    maxAttempts: 2, baseDelay: 1, jitter: .none, retriesNonIdempotentRequests: true)))
        clock.advance(by: 1)
        #expect(task.state.name == "finished")
        #expect(transport.records.count == 2)
        for record in transport.records {
            #expect(record.request.httpBody == Data("a,b\n1,2\n".utf8))
            #expect(record.request.value(forHTTPHeaderField: "Content-Length") == "8")
            #expect(record.request.value(forHTTPHeaderField: "Content-Type") == "text/csv")
        }
    }

    @Test func aReplayAfterARefusedCredentialStreamsTheFormAgain() throws {
        let transport = MockTransport()
        transport.stub(nil, "/upload") { request in
            request.value(forHTTPHeaderField: "Authorization") == "Bearer expired" ? .status(401) : .status(200)
        }
        let session = APIAuthentication(authenticator: MockAuthenticator())
        session.signIn(with: APIAuthentication.Credential(accessToken: "expired", refreshToken: "r"))
        let manager = UploadManager(
            engine: APIEngine(transport: transport, delivery: .inline, execution: .inline, authentication: session))
        let before = spooledFiles()
        let bytes = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let task = manager.send(
            UploadRequest(
                parameters: ["file": .file(APIFile(data: bytes, fileName: "a.bin"))], multipartInMemoryLimit: 1024))
        #expect(task.state.name == "finished")
        #expect(
            transport.records.map { $0.request.value(forHTTPHeaderField: "Authorization") } == [
                "Bearer expired", "Bearer token-1",
            ])
        for record in transport.records {
            let body = try #require(record.request.httpBody)
            let parts = parseMultipart(body, contentType: record.request.value(forHTTPHeaderField: "Content-Type"))
            #expect(parts?.first?.content == bytes, "each attempt sends the whole form")
        }
        #expect(Set(spooledFiles()).subtracting(before).isEmpty, "its temporary file is gone")
    }

    @Test func anUnreadableBodyFileFailsBeforeAnythingIsSent() {
        let (transport, manager, _) = make()
        let task = manager.send(UploadRequest(body: .file(URL(fileURLWithPath: "/nonexistent/x.bin"))))
        #expect(task.state.name.hasPrefix("invalidRequest"))
        #expect(transport.records.isEmpty)
    }

    @Test func fileBodiesAreNeverShared() throws {
        let (transport, manager, _) = make(MockTransport.Reply.status(200).held())
        let directory = ScratchDirectory()
        let file = directory.url.appendingPathComponent("x.bin")
        try Data([1, 2, 3]).write(to: file)
        manager.send(UploadRequest(body: .file(file), sharing: .always))
        manager.send(UploadRequest(body: .file(file), sharing: .always))
        #expect(transport.records.count == 2)
        transport.releaseAll()
    }

    // MARK: Stream bodies

    @Test(arguments: [nil, "uploads"] as [String?])
    func aStreamBodyIsOpenedAfreshForEveryAttempt(scope: String?) throws {
        let (transport, manager, clock) = make(.failure(.networkConnectionLost), .status(200))
        let payload = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0) })
        let opened = LockedState(0)
        let body = APIRequestBody.stream(length: Int64(payload.count)) {
            opened.withLock { $0 += 1 }
            return InputStream(data: payload)
        }
        let task = manager.send(
            UploadRequest(
                method: .put, body: body, retryPolicy: APIRetryPolicy(maxAttempts: 2, baseDelay: 1, jitter: .none),
                concurrencyScope: scope))
        clock.advance(by: 2)
        #expect(task.state.name == "finished")
        #expect(opened.withLock { $0 } == 2, "one stream per attempt")
        #expect(transport.records.map(\.request.httpBody) == [payload, payload], "each attempt sent it whole")
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Content-Length") == "5000")
        #expect(
            transport.records.first?.request.value(forHTTPHeaderField: "Content-Type") == "application/octet-stream")
    }

    @Test func aStreamBodyWithoutALengthHasNoContentLength() {
        let (transport, manager, _) = make()
        manager.send(
            UploadRequest(body: .stream(contentType: "text/csv") { InputStream(data: Data("a,b\n".utf8)) }))
        #expect(transport.records.first?.request.httpBody == Data("a,b\n".utf8))
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Content-Length") == nil)
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Content-Type") == "text/csv")
    }

    @Test func aStreamThatCannotBeOpenedFailsTheTaskWithATypedError() {
        struct Gone: Error {}
        let (transport, manager, _) = make()
        let task = manager.send(UploadRequest(body: .stream { throw Gone() }))
        guard case .failed(.invalidRequest(_, let underlying)) = task.state else {
            Issue.record("expected invalidRequest, got \(task.state)")
            return
        }
        #expect(underlying is Gone)
        #expect(transport.records.isEmpty, "nothing was sent")
    }

    @Test func twoStreamBodiesAreEqualOnlyWhenTheyAreTheSame() {
        let make: @Sendable () throws -> InputStream = { InputStream(data: Data()) }
        let one = APIRequestBody.stream(make)
        #expect(one == one)
        #expect(one != APIRequestBody.stream(make))
    }

    @Test func aFileUploadSentFromAnotherThreadArrivesWhole() async throws {
        let (transport, manager, _) = make()
        let directory = ScratchDirectory()
        let file = directory.url.appendingPathComponent("x.json")
        try Data(#"{"a":1}"#.utf8).write(to: file)
        let response = try await Task.detached { try await manager.response(for: UploadRequest(body: .file(file))) }
            .value
        #expect(response.statusCode == 200)
        #expect(transport.records.first?.request.httpBody == Data(#"{"a":1}"#.utf8))
        #expect(transport.records.first?.request.value(forHTTPHeaderField: "Content-Type") == "application/json")
    }
}

/// A directory removed when the value is released.
final class ScratchDirectory {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("MultipartTests-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}
