import Foundation

let usage = """
    Usage: Playground [--story NAME] [--help]

    Runs the APIManagerKit stories on an embedded simulated backend (virtual time, no server) and
    prints a timeline of each task: start, end, cancel, ignore, retry.

    Options:
      --story NAME   run one story: \(Story.all.map(\.name).joined(separator: ", "))
      --help         show this message
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n\n\(usage)\n".utf8))
    exit(64)
}

var selected = Story.all
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
    default:
        fail("unknown argument \"\(argument)\"")
    }
}

for (index, story) in selected.enumerated() {
    if index > 0 { print("") }
    print("== \(story.title)  [--story \(story.name)]")
    story.run()
}
