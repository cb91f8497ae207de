/// The response stage of an attempt: validates the raw response and builds the typed one through
/// the manager's `response(for:from:)`; a `304` to a revalidation builds from the refreshed stored
/// entry; a response that built is handed to the cache store stage.
enum ResponseStage {
    enum Outcome {
        /// The typed response, and where it came from (`.network` or `.revalidated`).
        case built(AnyAPITask.BuiltResponse, APIResponseCache.Source)
        /// The transport failed, or the response was refused or did not decode.
        case failed(APIError)
    }

    static func run(_ task: AnyAPITask, result: Result<APIRawResponse, APIError>, cache: CacheContext?) -> Outcome {
        switch result {
        case .failure(let error):
            return .failed(error)
        case .success(let raw) where task.bag.isTransfer:
            return TransferCacheStage.respond(task, raw: raw, cache: cache)
        case .success(let raw):
            if raw.statusCode == 304, let refreshed = cache?.refresh(with: raw) {
                switch task.buildResponse(refreshed.response) {
                case .success(let payload): return .built(payload, .revalidated)
                case .failure(let error): return .failed(error)
                }
            }
            switch task.buildResponse(raw) {
            case .success(let payload):
                cache?.store(raw)
                return .built(payload, .network)
            case .failure(let error):
                return .failed(error)
            }
        }
    }
}
