// The observable models as an app target uses them (default isolation MainActor): a spinner while
// the cart has tasks in flight, a task's progress.
import APIManagerKit

@available(macOS 14, iOS 17, *)
final class CartSpinnerModel {
    let activity: APIEngine.Activity

    init(api: CartAPI) {
        activity = api.activity
    }

    var showsSpinner: Bool { activity.isBusy }
    var isOffline: Bool { activity.network != .online }

    func statusOfAdding(_ item: CartItem, with api: CartAPI) throws -> AnyAPITask.Status {
        api.send(try .add(item)).status
    }
}
