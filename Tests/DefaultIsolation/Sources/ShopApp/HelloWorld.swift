// README "Hello, world", word for word, in an app target whose default isolation is MainActor.
import APIManagerKit
import Foundation

struct Hello: APIRequest {
    let url = URL(string: "https://httpbin.org/get")!
}

struct Greeting: APIResponse, Decodable {
    let url: String
}

final class HelloAPI: APIManager {
    typealias Request = Hello
    typealias Response = Greeting
    let engine = APIEngine()
}

func sayHello() async throws {
    let greeting = try await HelloAPI().response(for: Hello())
    print("GET \(greeting.url) answered")
}
