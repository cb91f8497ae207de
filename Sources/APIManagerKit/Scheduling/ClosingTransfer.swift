/// The handle of a transfer that writes into a sink of the engine's (a download's file, a streamed
/// body): cancelling it closes the sink first, then the transport. A transport may still hand over
/// parts after the cancellation (URLSession delivers what it already read), and may even answer
/// with success: the closed sink drops those parts, a download's partial file stays as it was (a
/// later request resumes from it), and the attempt's answer counts as a cancellation (see
/// ``DownloadStage/complete(_:answer:)`` and the engine's receive stage), so a cut body never
/// passes for a whole one.
struct ClosingTransfer: APICancellable {
    /// Closes the sink: ``APIResponseBodyFile/cancel()`` or ``APIResponseBodyStream/cancel()``.
    let closeSink: @Sendable () -> Void
    let transfer: any APICancellable

    func cancel() {
        closeSink()
        transfer.cancel()
    }
}
