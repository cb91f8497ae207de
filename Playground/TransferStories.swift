import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The stories of files and streams: an upload with a progress bar, a download that is cut and
/// resumes, and a live feed of server-sent events that drops and reconnects.
extension Story {
    static let photoUpload = Story(
        name: "upload", title: "Photo upload: a multipart form with a progress bar (reportsProgress)"
    ) { stage in
        stage.stub("/photos", MockTransport.Reply.status(201).uploading(over: 2, steps: 4).after(0.2), live: "post")
        // 2 MiB of "photo": a JPEG's first bytes, so the part says image/jpeg.
        var photo = Data([0xFF, 0xD8, 0xFF, 0xE0])
        photo.append(Data(count: (2 << 20) - 4))
        let task = stage.send("photo", "/photos") {
            $0.method = .post
            $0.reportsProgress = true
            $0.parameters = ["caption": "Sunset", "photo": .file(APIFile(data: photo, fileName: "sunset.jpg"))]
        }
        stage.at(3)
        let sent = (try? task.request.makeURLRequest().value(forHTTPHeaderField: "Content-Type")) ?? ""
        stage.timeline.note("photo", sent.hasPrefix("multipart/form-data") ? "sent as multipart/form-data" : sent)
    }

    static let resumedDownload = Story(
        name: "resume", title: "Download: cut half-way, resumed where it stopped (Range + If-Range)"
    ) { stage in
        let size = 4 << 20
        let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 % 251) })
        stage.stub("/report.bin", live: "fixture/file/\(size)") {
            request in
            guard let range = request.value(forHTTPHeaderField: "Range"),
                let from = Int(range.dropFirst("bytes=".count).dropLast())
            else {
                return MockTransport.Reply.status(
                    200, headers: ["ETag": "\"r1\"", "Content-Length": "\(size)"], body: body
                ).inChunks(10, every: 0.1).cut(after: size * 6 / 10)
            }
            return MockTransport.Reply.status(
                206, headers: ["ETag": "\"r1\"", "Content-Range": "bytes \(from)-\(size - 1)/\(size)"],
                body: body.subdata(in: from..<size)
            ).inChunks(4, every: 0.1)
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("Playground-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("report.bin")
        let task = stage.send(
            "report.bin", "/report.bin", retry: APIRetryPolicy(maxAttempts: 3, baseDelay: 0.3, jitter: .none)
        ) {
            $0.download = APIDownload(to: destination)
            // Live, the fixture cuts the first request of a realm at 60 %.
            if stage.isLive {
                $0.parameters = .query(["realm": .string(UUID().uuidString), "cut": .int(size * 6 / 10)])
            }
        }
        stage.at(4)
        let onDisk = (try? FileManager.default.attributesOfItem(atPath: destination.path)[.size] as? Int) ?? 0
        let whole = onDisk == size && task.attemptCount == 2
        stage.timeline.note(
            "report.bin",
            whole ? "4.0 MiB on disk after 2 attempts, the second asked for the rest only" : "\(onDisk) bytes on disk")
    }

    static let liveFeed = Story(
        name: "feed", title: "Live feed: server-sent events; the stream drops and resumes (Last-Event-ID)"
    ) { stage in
        let realm = UUID().uuidString
        let eventStream = ["Content-Type": "text/event-stream"]
        stage.stub("/feed", live: "fixture/sse") { request in
            func event(_ id: Int) -> String { "id: \(id)\nevent: tick\ndata: event \(id)\n\n" }
            switch request.value(forHTTPHeaderField: "Last-Event-ID") {
            case nil:
                let text = "retry: 300\n\n" + (1...3).map(event).joined() + "id: 4\ndata: half"
                return MockTransport.Reply.status(200, headers: eventStream, body: Data(text.utf8))
                    .inChunks(4, every: 0.2).cut(after: text.utf8.count - 2)
            case "3"?:
                return MockTransport.Reply.status(
                    200, headers: eventStream, body: Data((4...5).map(event).joined().utf8)
                ).inChunks(2, every: 0.2)
            default:
                return MockTransport.Reply.status(204)
            }
        }
        var request = StoryRequest(label: "feed", url: stage.baseURL, path: stage.path("/feed"))
        request.headers = ["Accept": "text/event-stream"]
        if stage.isLive {
            request.parameters = .query(["count": 5, "drop": 3, "retry": 300, "realm": .string(realm)])
        }
        let events = stage.api.events(for: request, reconnection: APIServerSentEvent.Reconnection(maxAttempts: 2))
        let timeline = stage.timeline
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            var iterator = events.makeAsyncIterator()
            var count = 0
            do {
                while let event = try await iterator.next() {
                    count += 1
                    timeline.note(
                        "feed",
                        "\(event.type) #\(event.id ?? "-"): \(event.data.replacingOccurrences(of: "\n", with: " / "))")
                }
                timeline.note("feed", "\(count) events, each once; the stream ended with a 204")
            } catch {
                timeline.note("feed", "ends: \(error)")
            }
            done.signal()
        }
        // The events are read on another task: the stage moves the clock in steps and gives the
        // reader a moment at each (simulated), or waits real time (live).
        for step in 1...100 {
            stage.at(Double(step) * 0.1)
            if done.wait(timeout: .now() + (stage.isLive ? .seconds(0) : .milliseconds(20))) == .success { return }
        }
        stage.timeline.note("feed", "did not end in 10 s")
    }
}
