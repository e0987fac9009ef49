import FoundationEssentials
import Glibc
import HostModel
import HostSupport

/// The attachment copies: one folder per record under `attachments/`, each copy a file of its
/// own (fsync'd before the row naming it commits); its size and sha256 are stored with the row.
extension Repository {
    /// The bytes of a record's attachment copies, in order (a copy that went missing is
    /// skipped), for a chain that runs over the record again.
    package func attachments(of rowID: Int64) throws(StorageError) -> [Attachment] {
        try attachmentFiles(of: rowID).compactMap { copy in
            guard case .success(let data) = BoundedFile.read(copy.file.path, limit: ReportContent.attachmentMaxBytes, system: system)
            else { return nil }
            return Attachment(name: copy.attachment.name, filename: copy.attachment.filename, data: data, source: copy.attachment.source)
        }
    }

    /// A record's attachments as stored: what the document says of each (size and sha256 as
    /// taken when it was copied) and the file its bytes stream from, in order. Reads no bytes,
    /// except to hash a copy written before schema 5.
    package func attachmentFiles(of rowID: Int64) throws(StorageError) -> [(attachment: Attachment, file: URL)] {
        try database.query(
            "SELECT position, name, filename, source, file, size, sha256 FROM attachments WHERE record = ? ORDER BY position",
            [.integer(rowID)]
        ).map { row in
            let file = attachmentFile(record: rowID, row: row)
            let size = Int(clamping: min(max(row[5].int ?? 0, 0), Int64(ReportContent.attachmentMaxBytes)))
            let digest = row[6].string ?? SHA256.hex(ofFileAt: file.path, limit: ReportContent.attachmentMaxBytes, system: system) ?? ""
            let attachment = Attachment(
                name: row[1].string ?? "", filename: row[2].string ?? "", size: size, sha256: digest,
                source: row[3].string.flatMap(AttachmentSource.init(rawValue:)) ?? .recovered)
            return (attachment, file)
        }
    }

    /// A copy's file: its own name (schema 3) or, for older rows, its position. A name from
    /// the database that is not a plain file name (`..`, a `/`) falls back to the position:
    /// a damaged row must never point outside the record's folder (it is read, sent and
    /// deleted there).
    func attachmentFile(record: Int64, row: [SQLValue]) -> URL {
        let stored = row[4].string.flatMap { $0.isEmpty || $0 == "." || $0 == ".." || $0.contains("/") ? nil : $0 }
        return attachmentsFolder.appendingPathComponent(String(record), isDirectory: true)
            .appendingPathComponent(stored ?? String(row[0].int ?? 0), isDirectory: false)
    }

    /// Writes the copies a document's attachments need and replaces the rows that name them.
    /// An attachment whose bytes a copy of the record already holds (same size and sha256: the
    /// journal's copy of what the chain kept) reuses that copy: an attachment is copied once.
    /// A new copy gets a new file name (fsync'd). When a copy fails, the ones written here are
    /// removed before the error is thrown; with `omittingWhatDoesNotFit`, a copy the disk has
    /// no room for is left out instead (`AttachmentCopies.omitted`), and so is its row.
    func writeAttachments(
        _ attachments: [Attachment], record: Int64, isNew: Bool = false, omittingWhatDoesNotFit: Bool = false
    ) throws(StorageError) -> AttachmentCopies {
        // Made only when a copy is written (a URL costs more than the query for a report with none).
        var folder: URL { attachmentsFolder.appendingPathComponent(String(record), isDirectory: true) }
        // A record just inserted has no rows to read or replace.
        let existing = isNew ? [] : try database.query(
            "SELECT position, name, filename, source, file, size, sha256 FROM attachments WHERE record = ?", [.integer(record)]
        ).map { row in (file: attachmentFile(record: record, row: row), size: Int(row[5].int ?? -1), sha256: row[6].string) }
        if !existing.isEmpty { try database.query("DELETE FROM attachments WHERE record = ?", [.integer(record)]) }
        var copies = AttachmentCopies()
        var kept: Set<URL> = []
        var position = 0  // the rows' order, without gaps where a copy was left out
        do throws(StorageError) {
            for attachment in attachments {
                let file: URL
                if let reused = existing.first(where: {
                    $0.size == attachment.size && $0.sha256 == attachment.sha256 && system.fileExists($0.file.path)
                }) {
                    file = reused.file
                    kept.insert(file)
                } else {
                    let folder = folder
                    if case .failure(let failure) = Paths.makeFolder(folder.path, system: system) {
                        throw StorageError(path: folder.path, message: "cannot create the attachment folder (\(failure))")
                    }
                    file = folder.appendingPathComponent(randomUUID(), isDirectory: false)
                    do throws(StorageError) {
                        try DurableFile.createNew(attachment.data, at: file, system: system)
                    } catch where omittingWhatDoesNotFit && error.outOfSpace {
                        copies.omitted.append(attachment)
                        continue
                    }
                    copies.written.append(file)
                }
                try database.query(
                    "INSERT INTO attachments(record, position, name, filename, source, size, file, sha256) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                    [.integer(record), .integer(Int64(position)), .text(attachment.name), .text(attachment.filename),
                     .text(attachment.source.rawValue), .integer(Int64(attachment.size)), .text(file.lastPathComponent),
                     .text(attachment.sha256)])
                position += 1
            }
        } catch {
            for file in copies.written { system.removeItem(file.path) }
            throw error
        }
        if !copies.written.isEmpty { DurableFile.syncDirectory(folder, system: system) }
        if !copies.omitted.isEmpty && copies.written.isEmpty && kept.isEmpty { system.rmdir(folder.path) }  // made for nothing
        copies.replaced = Array(Set(existing.map(\.file)).subtracting(kept))
        return copies
    }
}

/// What `writeAttachments` did to a record's copies: the files it wrote (removed if the
/// transaction does not commit) and the files no row names any more (removed once it does).
struct AttachmentCopies {
    var written: [URL] = []
    var replaced: [URL] = []
    /// The attachments left out for lack of space (see `writeAttachments`).
    var omitted: [Attachment] = []
}

extension Repository {
    /// `document` without the attachments the disk had no room for, each noted in its
    /// internal log (SPEC D-3: omitted with a diagnostic).
    static func omitting(_ omitted: [Attachment], from document: ReportDocument, folder: String) -> ReportDocument {
        var document = document
        for attachment in omitted {
            if let index = document.content.attachments.firstIndex(where: { $0.name == attachment.name && $0.sha256 == attachment.sha256 }) {
                document.content.attachments.remove(at: index)
            }
            document.internalLog.append(InternalLogEntry(
                level: .warn, handler: "host",
                message: "attachment \(attachment.name) (\(attachment.size) bytes) omitted: no space left on the disk of \(folder)"))
        }
        return document
    }
}
