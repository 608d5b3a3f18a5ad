//! The `mimeType` OpenClaw's node host gives a file: from its first bytes
//! (`file-type`), else its extension (`MIME_BY_EXT`), else `text/plain`
//! for what reads as text and `application/octet-stream` for the rest;
//! `dir.list` uses the extension alone.

/// The magic numbers of the formats agents fetch most; `file-type` knows
/// more, and where it does and we do not, the extension decides.
const MAGIC: &[(usize, &[u8], &str)] = &[
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"PK\x03\x04", "application/zip"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"BM", "image/bmp"),
    (0, b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (0, b"Rar!\x1a\x07", "application/x-rar-compressed"),
    (0, b"OggS", "audio/ogg"),
    (0, b"fLaC", "audio/flac"),
    (0, b"\x7fELF", "application/x-elf"),
    (257, b"ustar", "application/x-tar"),
];

/// OpenClaw's `MIME_BY_EXT` (`packages/media-core/src/mime.ts`).
const BY_EXTENSION: &[(&str, &str)] = &[
    (".avif", "image/avif"),
    (".heic", "image/heic"),
    (".heif", "image/heif"),
    (".bmp", "image/bmp"),
    (".jpg", "image/jpeg"),
    (".jpeg", "image/jpeg"),
    (".png", "image/png"),
    (".svg", "image/svg+xml"),
    (".webp", "image/webp"),
    (".gif", "image/gif"),
    (".aiff", "audio/aiff"),
    (".aif", "audio/aiff"),
    (".aifc", "audio/aiff"),
    (".ogg", "audio/ogg"),
    (".oga", "audio/ogg"),
    (".mp3", "audio/mpeg"),
    (".m2a", "audio/mpeg"),
    (".wav", "audio/wav"),
    (".flac", "audio/flac"),
    (".aac", "audio/aac"),
    (".amr", "audio/amr"),
    (".opus", "audio/opus"),
    (".webm", "video/webm"),
    (".m4a", "audio/x-m4a"),
    (".m4b", "audio/mp4"),
    (".caf", "audio/x-caf"),
    (".avi", "video/x-msvideo"),
    (".m4v", "video/x-m4v"),
    (".mp4", "video/mp4"),
    (".mkv", "video/x-matroska"),
    (".flv", "video/x-flv"),
    (".wmv", "video/x-ms-wmv"),
    (".mov", "video/quicktime"),
    (".pdf", "application/pdf"),
    (".json", "application/json"),
    (".yaml", "application/yaml"),
    (".yml", "application/yaml"),
    (".zip", "application/zip"),
    (".gz", "application/gzip"),
    (".tar", "application/x-tar"),
    (".7z", "application/x-7z-compressed"),
    (".rar", "application/vnd.rar"),
    (".doc", "application/msword"),
    (".xls", "application/vnd.ms-excel"),
    (".ppt", "application/vnd.ms-powerpoint"),
    (
        ".docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    (
        ".xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    (
        ".pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    (".csv", "text/csv"),
    (".txt", "text/plain"),
    (".md", "text/markdown"),
    (".html", "text/html"),
    (".htm", "text/html"),
    (".xml", "text/xml"),
    (".css", "text/css"),
    (".cfg", "text/plain"),
    (".conf", "text/plain"),
    (".env", "text/plain"),
    (".ini", "text/plain"),
    (".js", "text/javascript"),
    (".log", "text/plain"),
    (".tsv", "text/tab-separated-values"),
];

/// Node's `path.extname` of the last name, lowercased: from the last dot
/// that is not the name's first character.
fn extension(path: &str) -> Option<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dot = name.rfind('.').filter(|&i| i > 0)?;
    Some(name[dot..].to_ascii_lowercase())
}

/// By extension alone (`mimeFromExtension`, as `dir.list` gives it).
pub fn of_name(path: &str) -> &'static str {
    by_extension(path).unwrap_or("application/octet-stream")
}

fn by_extension(path: &str) -> Option<&'static str> {
    let ext = extension(path)?;
    BY_EXTENSION
        .iter()
        .find(|(e, _)| *e == ext)
        .map(|(_, mime)| *mime)
}

/// A fetched file's type: its bytes, its extension, then the text test.
pub fn of_content(bytes: &[u8], path: &str) -> String {
    let sniffed = MAGIC
        .iter()
        .find(|(at, magic, _)| bytes.get(*at..*at + magic.len()) == Some(magic))
        .map(|(_, _, mime)| *mime)
        .or_else(|| webp(bytes));
    let ext = by_extension(path);
    let found = match sniffed {
        // A zip may be an Office document: its extension says which.
        Some("application/zip") => ext
            .filter(|e| e.contains("openxmlformats"))
            .or(Some("application/zip")),
        Some(s) => Some(s),
        None => ext,
    };
    match found {
        Some(mime) => mime.to_owned(),
        None if looks_like_text(bytes) => "text/plain".to_owned(),
        None => "application/octet-stream".to_owned(),
    }
}

fn webp(bytes: &[u8]) -> Option<&'static str> {
    (bytes.get(..4) == Some(b"RIFF")).then_some(())?;
    match bytes.get(8..12)? {
        b"WEBP" => Some("image/webp"),
        b"WAVE" => Some("audio/wav"),
        b"AVI " => Some("video/x-msvideo"),
        _ => None,
    }
}

/// OpenClaw's `isLikelyPlainText`: the first 8 KiB hold no NUL, are UTF-8,
/// and fewer than 1 % of them are control bytes other than \t \n \r.
fn looks_like_text(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return true;
    }
    let sample = &bytes[..bytes.len().min(8192)];
    if sample.contains(&0) {
        return false;
    }
    // A sample cut in the middle of a character is still text.
    let valid = match std::str::from_utf8(sample) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && sample.len() == 8192,
    };
    if !valid {
        return false;
    }
    let control = sample
        .iter()
        .filter(|&&b| b < 32 && !matches!(b, b'\t' | b'\n' | b'\r'))
        .count();
    (control as f64) / (sample.len() as f64) < 0.01
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_then_extension_then_text() {
        assert_eq!(
            of_content(b"\x89PNG\r\n\x1a\nrest", "/w/a.txt"),
            "image/png"
        );
        assert_eq!(of_content(b"{\"a\":1}", "/w/a.json"), "application/json");
        assert_eq!(of_content(b"hello\n", "/w/notes"), "text/plain");
        assert_eq!(of_content(b"", "/w/empty"), "text/plain");
        assert_eq!(
            of_content(b"\x00\x01\x02", "/w/blob"),
            "application/octet-stream"
        );
        assert_eq!(
            of_content(b"\xff\xfe\xfd", "/w/blob"),
            "application/octet-stream"
        );
        assert_eq!(
            of_content(b"PK\x03\x04..", "/w/a.docx"),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
        );
        assert_eq!(of_content(b"PK\x03\x04..", "/w/a.bin"), "application/zip");
    }

    #[test]
    fn extension_is_nodes_extname() {
        assert_eq!(of_name("/w/.env"), "application/octet-stream");
        assert_eq!(of_name("/w/a.ENV"), "text/plain");
        assert_eq!(of_name("/w/archive.tar.gz"), "application/gzip");
        assert_eq!(of_name("/w/noext"), "application/octet-stream");
    }
}
