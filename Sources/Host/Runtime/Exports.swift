// The engine's layers, each a target of its own (ARCHITECTURE.md): a program that imports
// `Host` sees them all, as it did when they were one target.
@_exported import HostCapture
@_exported import HostCore
@_exported import HostDelivery
@_exported import HostPlugins
@_exported import HostRecovery
@_exported import HostStore
