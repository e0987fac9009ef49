import HostSupport
/// The slot a plugin is loaded into (ABI: "Loading rules").
public enum PluginSlot: String, Sendable, CaseIterable {
    case wrapper, handler, delegate
}
