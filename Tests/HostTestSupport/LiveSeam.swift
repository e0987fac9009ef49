import Foundation
import Host
import HostPlugins
import HostStore
import HostSupport

// Tests are entries of their own: where a test does not hand the engine a seam, it runs on the
// real system calls. (The engine's own calls take the seam they are handed; these overloads
// exist only in the test support, so no engine code can reach the live seam through them.)

extension Repository {
    package static func openForReading(folder: URL) throws(StorageError) -> Repository? {
        try openForReading(folder: folder, system: .live)
    }

    package static func openForReading(existingFolder folder: URL) throws(StorageError) -> Repository? {
        try openForReading(existingFolder: folder, system: .live)
    }
}

extension BreadcrumbRing {
    package static func create(at path: String, slots: Int, threads: Bool = false) -> Result<BreadcrumbRing, SystemError> {
        create(at: path, slots: slots, threads: threads, system: .live)
    }

    package static func read(fileAt path: String, last limit: Int) -> (entries: [Entry], torn: Int)? {
        read(fileAt: path, last: limit, system: .live)
    }
}

extension PluginDataFolder {
    package static func make(repository: String, plugin name: String) -> String? {
        make(repository: repository, plugin: name, system: .live)
    }
}

extension Configuration {
    package static func load(path: String) throws(HostError) -> Configuration { try load(path: path, system: .live) }
}

extension BoundedFile {
    package static func read(_ path: String, limit: Int, followLinks: Bool = false) -> Result<Data, Failure> {
        read(path, limit: limit, followLinks: followLinks, system: .live)
    }
}
