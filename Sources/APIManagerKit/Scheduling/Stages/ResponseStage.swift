/// The response stage of an attempt: validates the raw response and builds the typed one through
/// the manager's `response(for:from:)`; a `304` to a revalidation builds from the refreshed stored
/// entry; a response that built is handed to the cache store stage.
enum ResponseStage {
    enum Outcome {
        /// The typed response, and where it came from (`.network` or `.revalidated`).
        case built(AnyAPITask.BuiltResponse, APIResponseSource)
        /// The transport failed, or the response was refused or did not decode.
        case failed(APIError)
    }

    static func run(_ task: AnyAPITask, result: Result<APIRawResponse, APIError>, cache: CacheContext?) -> Outcome {
        switch result {
        case .failure(let error):
            return .failed(error)
        case .success(let raw):
            let isTransfer = TransferCacheStage.isTransfer(task)
            if raw.statusCode == 304, let refreshed = cache?.refresh(with: raw) {
                let stored = refreshed.response
                if isTransfer {
                    switch TransferCacheStage.deliver(stored, to: task, requestURL: raw.url) {
                    case .answered(let payload): return .built(payload, .revalidated)
                    case .failed(let error), .unusable(let error): return .failed(error)
                    }
                }
                switch task.buildResponse(stored) {
                case .success(let payload): return .built(payload, .revalidated)
                case .failure(let error): return .failed(error)
                }
            }
            switch DownloadStage.buildResponse(raw, for: task) {
            case .success(let payload):
                if isTransfer {
                    cache?.store(transfer: TransferCacheStage.storedCopy(of: raw, for: task))
                } else {
                    cache?.store(raw)
                }
                return .built(payload, .network)
            case .failure(let error):
                return .failed(error)
            }
        }
    }
}
