import APIManagerKit
import Foundation

let usage = """
    Usage: Playground [--story NAME] [--base-url URL [--transport NAME]] [--record FILE] [--help]

    Runs the APIManagerKit stories and prints a timeline of each task: start, end, cancel, ignore,
    retry. By default they run on an embedded simulated backend (virtual time, no server).

    Options:
      --story NAME     run one story: \(Story.all.map(\.name).joined(separator: ", "))
      --base-url URL   run them against a real httpbin-compatible server instead, on real time
                       (for example the one `bash Scripts/integration-server.sh start` prints;
                       the session story needs its /fixture/token routes)
      --transport NAME the transport for --base-url: \(LiveTransports.names.joined(separator: ", ")) (urlsession
                       unless given; Transports/AsyncHTTPClient's PlaygroundAHC adds ahc)
      --record FILE    write every exchange the stories make to FILE as HAR 1.2 (secrets
                       redacted), to open in a browser's tools or replay with MockTransport.replay
      --help           show this message
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n\n\(usage)\n".utf8))
    exit(64)
}

var selected = Story.all
var liveBaseURL: URL?
var transportName = "urlsession"
var recording: URL?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--help", "-h":
        print(usage)
        exit(0)
    case "--story":
        guard let name = arguments.popFirst() else { fail("--story needs a name") }
        guard let story = Story.all.first(where: { $0.name == name }) else { fail("unknown story \"\(name)\"") }
        selected = [story]
    case "--base-url":
        guard let text = arguments.popFirst() else { fail("--base-url needs a URL") }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host?.isEmpty == false
        else { fail("--base-url needs an http or https URL with a host, not \"\(text)\"") }
        liveBaseURL = url
    case "--record":
        guard let path = arguments.popFirst(), !path.isEmpty else { fail("--record needs a file") }
        recording = URL(fileURLWithPath: path)
    case "--transport":
        guard let name = arguments.popFirst() else { fail("--transport needs a name") }
        guard LiveTransports.names.contains(name) else { fail("unknown transport \"\(name)\"") }
        transportName = name
    default:
        fail("unknown argument \"\(argument)\"")
    }
}

let recorder = APIEngine.HARRecorder()
for (index, story) in selected.enumerated() {
    if index > 0 { print("") }
    print(
        "== \(story.title)  [--story \(story.name)]"
            + (liveBaseURL.map { "  live: \($0.absoluteString) on \(transportName)" } ?? ""))
    let transport = LiveTransports.make(transportName) ?? URLSessionTransport()
    let stage = Stage(
        liveBaseURL: liveBaseURL, liveTransport: transport, authentication: story.authentication,
        recorder: recording == nil ? nil : recorder)
    story.run(stage)
    if stage.isLive { stage.settle() }
}
if let recording {
    do {
        try recorder.write(to: recording)
        print("\nrecorded \(recorder.entries.count) exchange(s) to \(recording.path)")
    } catch {
        FileHandle.standardError.write(Data("error: the recording could not be written: \(error)\n".utf8))
        exit(1)
    }
}
