// What a program that imports `Host` sees besides the runtime: the model (the report, its
// documents, the configuration, diagnostics and the value types the runtime takes and gives).
// A client that needs a deeper layer (the seam, the repository, the plugin table) imports and
// declares that target itself.
@_exported import HostModel
