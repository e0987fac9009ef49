import Foundation

/// File paths as the host resolves them.
public enum Paths {
    /// Makes `path` absolute against `base` (the working directory by default).
    public static func absolute(_ path: String, relativeTo base: String = FileManager.default.currentDirectoryPath) -> String {
        let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : URL(fileURLWithPath: base).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }
}
