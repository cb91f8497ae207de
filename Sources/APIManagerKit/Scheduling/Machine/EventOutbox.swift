/// The delivery bookkeeping, kept apart from the scheduling rules: events wait here, in the order the
/// machine produced them, until one delivery run at a time takes them.
///
/// The outbox and the batch being delivered trade places, and the emptied batch is kept as a spare,
/// so a steady flow of events reuses two buffers instead of allocating one per batch.
struct EventOutbox {
    typealias Batch = [(AnyAPITask, AnyAPITask.Event)]

    private var queued: Batch = []
    private var spare: Batch = []
    /// Whether a delivery run is scheduled and has not yet found the outbox empty.
    private(set) var isDeliveryScheduled = false
    /// How many times a delivery run took events: a watch over the delivery queue compares it over
    /// time (``APIEngine/DeliveryWatch``).
    private(set) var takes: UInt64 = 0

    /// Queues an event; `true` when no delivery run is scheduled, so one is to be scheduled now.
    mutating func append(_ event: AnyAPITask.Event, for task: AnyAPITask) -> Bool {
        queued.append((task, event))
        guard !isDeliveryScheduled else { return false }
        isDeliveryScheduled = true
        return true
    }

    /// Moves the queued events into `batch` (empty, its capacity reused) for delivery; `false`, with
    /// nothing moved, once none are left, which ends the delivery run.
    mutating func take(into batch: inout Batch) -> Bool {
        if queued.isEmpty {
            isDeliveryScheduled = false
            if spare.capacity < batch.capacity { swap(&spare, &batch) }
            return false
        }
        if batch.capacity == 0 { swap(&batch, &spare) }
        swap(&batch, &queued)
        takes &+= 1
        return true
    }
}
