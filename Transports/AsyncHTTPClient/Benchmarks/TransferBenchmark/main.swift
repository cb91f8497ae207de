// Throughput and peak memory of big transfers: APIManagerKit on each transport against the raw
// client of that transport (URLSession; AsyncHTTPClient), one transfer per process so that each
// process's peak resident memory belongs to one client. Scripts/benchmark-transfers.sh starts nginx
// on 127.0.0.1, generates the files and runs this; see Benchmarks/README.md, "Files and streams".
//
//   TransferBenchmark --url http://127.0.0.1:PORT --transport urlsession|ahc --client raw|rawDelegate|manager
//       --mode download|upload|multipart|stall [--file PATH] [--path /big.bin] [--stall SECONDS] [--dir DIR]
//
// It prints one line: `mode transport client bytes seconds MiB/s baseline-KiB peak-KiB growth-MiB [buffered-MiB]`.
import APIManagerKit
import APIManagerKitAsyncHTTPClient
import AsyncHTTPClient
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Options {
    var baseURL: URL?
    var transport = "urlsession"
    var client = "manager"
    var mode = "download"
    var file: String?
    var path = "/big.bin"
    var stallSeconds = 5.0
    var directory = NSTemporaryDirectory()
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("TransferBenchmark: \(message)\n".utf8))
    exit(1)
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        let value = arguments.popFirst() ?? ""
        switch argument {
        case "--url": options.baseURL = URL(string: value)
        case "--transport": options.transport = value
        case "--client": options.client = value
        case "--mode": options.mode = value
        case "--file": options.file = value
        case "--path": options.path = value
        case "--stall": options.stallSeconds = Double(value) ?? options.stallSeconds
        case "--dir": options.directory = value
        default: fail("unknown argument \(argument)")
        }
    }
    return options
}

/// Resident memory now and its peak, in KiB (from /proc/self/status).
func memory() -> (resident: Int, peak: Int) {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// Sets the peak (VmHWM) back to the resident memory now (Linux: `5` to /proc/self/clear_refs).
func resetPeak() {
    try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
}

/// Waits on the main thread for `body` to call its argument: nothing here runs on the main queue or
/// the main actor (top-level code is on the main actor, hence `Task.detached`).
func wait(_ body: (@escaping @Sendable (Result<Int64, any Error>) -> Void) -> Void) -> Int64 {
    let done = DispatchSemaphore(value: 0)
    let result = NIOLockedValueBox<Result<Int64, any Error>?>(nil)
    body { outcome in
        result.withLockedValue { $0 = outcome }
        done.signal()
    }
    done.wait()
    switch result.withLockedValue({ $0 }) {
    case .success(let bytes)?: return bytes
    case .failure(let error)?: fail("the transfer failed: \(error)")
    case nil: fail("no result")
    }
}

/// Runs `work` in a detached Swift task and waits for the bytes it returns (see ``wait(_:)``).
func waitFor(_ work: @escaping @Sendable () async throws -> Int64) -> Int64 {
    wait { done in
        Task.detached {
            do { done(.success(try await work())) } catch { done(.failure(error)) }
        }
    }
}

/// The manager's response, refused unless it is a `200`.
func ok(_ response: APIRawResponse) throws -> APIRawResponse {
    guard response.statusCode == 200 else { throw URLError(.badServerResponse) }
    return response
}

func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
}

// MARK: The manager

struct TransferRequest: APIRequest {
    var url: URL
    var method: HTTPMethod = .get
    var body: APIRequestBody?
    var download: APIDownload?
    var maxResponseBodySize: Int? { nil }
    var retryPolicy: APIRetryPolicy? { nil }
}

final class TransferAPI: APIManager {
    typealias Request = TransferRequest
    typealias Response = APIRawResponse
    let engine: APIEngine

    init(transport: any APITransport) {
        engine = APIEngine(transport: transport, delivery: .inline)
    }
}

/// A URLSession delegate that writes a body's parts to `file` (if any) and reports the end.
final class DelegateClient: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `file` is written from the session's serial delegate queue only.
    let file: FileHandle?
    let done: @Sendable (Result<Void, any Error>) -> Void
    init(file: FileHandle?, done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        self.file = file
        self.done = done
    }
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        file?.write(data)
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        done(error.map { .failure($0) } ?? .success(()))
        session.finishTasksAndInvalidate()
    }
}

// MARK: Main

let options = parseOptions()
guard let baseURL = options.baseURL, let url = URL(string: options.path, relativeTo: baseURL)?.absoluteURL,
    let small = URL(string: "/small.json", relativeTo: baseURL)?.absoluteURL,
    let sink = URL(string: "/upload", relativeTo: baseURL)?.absoluteURL
else { fail("usage: see the top of Benchmarks/TransferBenchmark/main.swift") }
let destination = URL(fileURLWithPath: options.directory).appendingPathComponent("download-\(getpid()).bin")
defer { try? FileManager.default.removeItem(at: destination) }

let session = URLSession(configuration: URLSessionTransport.defaultConfiguration)
let httpClient = HTTPClient(eventLoopGroupProvider: .singleton)
let transport: any APITransport =
    options.transport == "ahc" ? AsyncHTTPClientTransport(client: httpClient) : URLSessionTransport()
let api = TransferAPI(transport: transport)

/// One transfer: returns the bytes moved, and (for `stall`) the body held while the consumer slept.
func transfer() -> (bytes: Int64, held: Int?) {
    let uploadFile = options.file.map(URL.init(fileURLWithPath:))
    switch (options.client, options.mode) {
    case ("manager", "download"):
        let request = TransferRequest(url: url, download: APIDownload(to: destination, ifExists: .replace))
        return (
            waitFor {
                _ = try ok(try await api.response(for: request))
                return fileSize(destination.path)
            }, nil
        )
    case ("manager", "upload"), ("manager", "multipart"):
        guard let uploadFile else { fail("--file is needed") }
        var body = APIRequestBody.file(uploadFile)
        if options.mode == "multipart" {
            var form = APIMultipartFormData()
            do {
                try form.append("benchmark", name: "title")
                try form.append(APIFile(url: uploadFile, fileName: "big.bin"), name: "file")
            } catch { fail("\(error)") }
            body = .multipart(form)
        }
        let request = TransferRequest(url: sink, method: .post, body: body)
        return (
            waitFor {
                _ = try ok(try await api.response(for: request))
                return fileSize(uploadFile.path)
            }, nil
        )
    case ("manager", "stall"):
        // URLSession on Linux reads on while the consumer sleeps: the rest of the file waits in the
        // stream's overflow file, bounded by `spillLimit` (512 MiB unless set). The benchmark
        // measures what holding the whole file costs, so the bound is raised past its size.
        APIResponseBodyStream.spillLimit = 4 << 30
        let held = NIOLockedValueBox(0)
        let bytes = waitFor {
            let stream = api.bytes(for: TransferRequest(url: url))
            var count: Int64 = 0
            var stalled = false
            for try await chunk in stream {
                count += Int64(chunk.count)
                if !stalled {
                    stalled = true
                    try await Task.sleep(nanoseconds: UInt64(options.stallSeconds * 1e9))
                    held.withLockedValue { $0 = stream.bufferedBytes }
                }
            }
            return count
        }
        return (bytes, held.withLockedValue { $0 })
    case ("rawDelegate", "upload"), ("rawDelegate", "multipart"):
        // URLSession as the transport uses it: a session with a delegate, no completion handler.
        guard let uploadFile else { fail("--file is needed") }
        var request = URLRequest(url: sink)
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        return (
            wait { done in
                let delegate = DelegateClient(file: nil) { done($0.map { _ in fileSize(uploadFile.path) }) }
                let session = URLSession(
                    configuration: URLSessionTransport.defaultConfiguration, delegate: delegate, delegateQueue: nil)
                session.uploadTask(with: request, fromFile: uploadFile).resume()
            }, nil
        )
    case ("rawDelegate", "download"):
        // A data task whose delegate writes each part to the file, as the transport does.
        _ = FileManager.default.createFile(atPath: destination.path, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: destination.path) else { fail("cannot write") }
        return (
            wait { done in
                let delegate = DelegateClient(file: handle) { result in
                    try? handle.close()
                    done(result.map { _ in fileSize(destination.path) })
                }
                let session = URLSession(
                    configuration: URLSessionTransport.defaultConfiguration, delegate: delegate, delegateQueue: nil)
                session.dataTask(with: url).resume()
            }, nil
        )
    case ("raw", "download") where options.transport == "ahc":
        return (
            wait { done in
                do {
                    let delegate = try FileDownloadDelegate(path: destination.path)
                    let request = try HTTPClient.Request(url: url)
                    httpClient.execute(request: request, delegate: delegate).futureResult.whenComplete { result in
                        done(result.map { _ in fileSize(destination.path) }.mapError { $0 })
                    }
                } catch { done(.failure(error)) }
            }, nil
        )
    case ("raw", "download"):
        return (
            wait { done in
                session.downloadTask(with: url) { location, response, error in
                    guard let location, (response as? HTTPURLResponse)?.statusCode == 200 else {
                        return done(.failure(error ?? URLError(.badServerResponse)))
                    }
                    do {
                        try? FileManager.default.removeItem(at: destination)
                        try FileManager.default.moveItem(at: location, to: destination)
                        done(.success(fileSize(destination.path)))
                    } catch { done(.failure(error)) }
                }.resume()
            }, nil
        )
    case ("raw", "upload") where options.transport == "ahc", ("raw", "multipart") where options.transport == "ahc":
        guard let uploadFile else { fail("--file is needed") }
        return (
            wait { done in
                do {
                    let length = fileSize(uploadFile.path)
                    let path = uploadFile.path
                    let body = HTTPClient.Body.stream(contentLength: length) { writer in
                        let eventLoop = MultiThreadedEventLoopGroup.singleton.any()
                        let fileIO = NonBlockingFileIO(threadPool: .singleton)
                        return fileIO.openFile(_deprecatedPath: path, eventLoop: eventLoop).flatMap { handle, region in
                            fileIO.readChunked(
                                fileRegion: region, allocator: ByteBufferAllocator(), eventLoop: eventLoop
                            ) { chunk in writer.write(.byteBuffer(chunk)) }.always { _ in try? handle.close() }
                        }
                    }
                    let request = try HTTPClient.Request(
                        url: sink, method: .POST, headers: ["Content-Type": "application/octet-stream"], body: body)
                    httpClient.execute(request: request).whenComplete { result in
                        switch result {
                        case .success(let response) where response.status.code == 200: done(.success(length))
                        case .success: done(.failure(URLError(.badServerResponse)))
                        case .failure(let error): done(.failure(error))
                        }
                    }
                } catch { done(.failure(error)) }
            }, nil
        )
    case ("raw", "upload"), ("raw", "multipart"):
        guard let uploadFile else { fail("--file is needed") }
        var request = URLRequest(url: sink)
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        return (
            wait { done in
                session.uploadTask(with: request, fromFile: uploadFile) { _, response, error in
                    guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                        return done(.failure(error ?? URLError(.badServerResponse)))
                    }
                    done(.success(fileSize(uploadFile.path)))
                }.resume()
            }, nil
        )
    default:
        fail("no client \(options.client) for \(options.mode)")
    }
}

// A small request first, so the connection pool, the threads and the code are all in memory.
_ = waitFor { Int64(try await api.response(for: TransferRequest(url: small)).body.count) }
_ = wait { done in
    if options.transport == "ahc" {
        httpClient.get(url: small.absoluteString).whenComplete { done($0.map { _ in 0 }.mapError { $0 }) }
    } else {
        session.dataTask(with: small) { _, _, error in done(error.map { .failure($0) } ?? .success(0)) }.resume()
    }
}
resetPeak()
let baseline = memory().resident
let start = DispatchTime.now().uptimeNanoseconds
let (bytes, held) = transfer()
let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
let peak = memory().peak
let line =
    [
        options.mode, options.transport, options.client, "\(bytes)", String(format: "%.3f", seconds),
        String(format: "%.1f", Double(bytes) / 1_048_576 / seconds), "\(baseline)", "\(peak)",
        String(format: "%.1f", Double(peak - baseline) / 1024),
    ] + (held.map { [String(format: "%.2f", Double($0) / 1_048_576)] } ?? [])
print(line.joined(separator: " "))
try? httpClient.syncShutdown()
