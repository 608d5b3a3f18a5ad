//! `camera.list`, `camera.snap` and `camera.clip` through FFmpeg over V4L2,
//! with OpenClaw's Linux node host's command lines: the `/dev/videoN` that
//! FFmpeg can list formats for are the cameras; a photo is one JPEG frame
//! after a delay, scaled down to a width; a clip is H.264 (with the
//! PulseAudio default source when audio is asked for and allowed) in MP4.
//!
//! Must never: open a device an agent named that is not one of the cameras
//! listed, read a capture bigger than the gateway can carry (the size is
//! checked before reading), capture two at once (one device, and each
//! capture holds tens of megabytes while it is encoded), or outlive the
//! caller's time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::{Job, ToolError, check, failure, finite};

/// The base64 a capture may take: OpenClaw's limit, which keeps the
/// result within the gateway's 25 MiB frames.
pub(in crate::tools) const MAX_BASE64: usize = 26_148_864;
const MAX_RAW: u64 = (MAX_BASE64 / 4 * 3) as u64;
/// Cameras probed at most (each probe may take five seconds).
const MAX_DEVICES: usize = 64;
const PROBE_TIME: Duration = Duration::from_secs(5);

/// One capture at a time on this machine.
static CAPTURING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// FFmpeg, wherever PATH has it.
pub fn ffmpeg() -> Option<PathBuf> {
    super::find("ffmpeg", &[])
}

/// Where the devices and their names are: `/dev` and sysfs. Debug builds
/// (the tests: no camera exists there) may point both under another root.
fn roots() -> (PathBuf, PathBuf) {
    #[cfg(debug_assertions)]
    if let Some(root) = std::env::var_os("CLAWBOT_TEST_V4L2_ROOT") {
        let root = PathBuf::from(root);
        return (root.join("dev"), root.join("video4linux"));
    }
    ("/dev".into(), "/sys/class/video4linux".into())
}

/// `camera.list`: `{devices: [{id, name, position, deviceType}]}`.
pub async fn list(budget: Duration) -> Result<Value, ToolError> {
    let ffmpeg = ffmpeg().ok_or_else(|| failure("CAMERA_UNAVAILABLE: ffmpeg not found"))?;
    within(budget, async {
        let devices = devices(&ffmpeg).await?;
        Ok(json!({"devices": devices.iter().map(Device::json).collect::<Vec<_>>()}))
    })
    .await
}

struct Device {
    id: String,
    name: String,
}

impl Device {
    fn json(&self) -> Value {
        json!({"id": self.id, "name": self.name, "position": "unknown", "deviceType": "v4l2"})
    }
}

/// The `videoN` entries FFmpeg can list formats for, in number order.
async fn devices(ffmpeg: &Path) -> Result<Vec<Device>, ToolError> {
    let (dev, sys) = roots();
    let mut entries: Vec<(u64, String)> = std::fs::read_dir(&dev)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name.strip_prefix("video")?;
            let number = (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse().unwrap_or(u64::MAX))?;
            Some((number, name))
        })
        .collect();
    entries.sort();
    entries.truncate(MAX_DEVICES);
    let mut devices = Vec::new();
    for (_, entry) in entries {
        let id = dev.join(&entry).to_string_lossy().into_owned();
        let probe = Job::new(
            "CAMERA_UNAVAILABLE",
            ffmpeg,
            vec![
                "-hide_banner".into(),
                "-f".into(),
                "v4l2".into(),
                "-list_formats".into(),
                "all".into(),
                "-i".into(),
                id.clone().into(),
            ],
            PROBE_TIME,
        )
        .run(std::future::pending())
        .await?;
        let said = format!(
            "{}{}\n{}",
            probe.output.head,
            probe.output.tail,
            probe
                .stderr
                .as_ref()
                .map(|c| format!("{}{}", c.head, c.tail))
                .unwrap_or_default()
        );
        if !lists_formats(&said) {
            continue;
        }
        let name = std::fs::read_to_string(sys.join(&entry).join("name"))
            .map(|n| n.trim().to_owned())
            .unwrap_or(entry);
        devices.push(Device { id, name });
    }
    Ok(devices)
}

/// `\b(?:Raw|Compressed)\s*:` in what FFmpeg said of a device.
fn lists_formats(said: &str) -> bool {
    ["Raw", "Compressed"].iter().any(|word| {
        said.match_indices(word).any(|(i, _)| {
            let before = said[..i].chars().next_back();
            let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
            word_start && said[i + word.len()..].trim_start().starts_with(':')
        })
    })
}

/// The camera asked for (`deviceId`, one of those listed) or the first.
async fn choose(ffmpeg: &Path, asked: &Value) -> Result<Device, ToolError> {
    let mut devices = devices(ffmpeg).await?;
    if let Some(id) = asked.as_str().map(str::trim).filter(|id| !id.is_empty()) {
        return match devices.iter().position(|d| d.id == id) {
            Some(i) => Ok(devices.swap_remove(i)),
            None => Err(failure(format!(
                "INVALID_REQUEST: camera device not found: {id}"
            ))),
        };
    }
    if devices.is_empty() {
        return Err(failure("CAMERA_UNAVAILABLE: no V4L2 camera devices found"));
    }
    Ok(devices.swap_remove(0))
}

/// The `format` asked for, lowercased, or `default`.
fn format(params: &Value, default: &str) -> String {
    params
        .get("format")
        .and_then(Value::as_str)
        .map(str::to_lowercase)
        .unwrap_or_else(|| default.to_owned())
}

/// `camera.snap`: `{format, base64, width, height}`.
pub async fn snap(params: Value, budget: Duration) -> Result<Value, ToolError> {
    let ffmpeg = ffmpeg().ok_or_else(|| failure("CAMERA_UNAVAILABLE: ffmpeg not found"))?;
    let format = format(&params, "jpg");
    if format != "jpg" && format != "jpeg" {
        return Err(failure(format!(
            "INVALID_REQUEST: unsupported camera image format: {format}"
        )));
    }
    within(budget, async {
        let _one = CAPTURING.lock().await;
        let device = choose(&ffmpeg, &params["deviceId"]).await?;
        let max_width = finite(&params, "maxWidth")
            .filter(|w| *w > 0.0)
            .map_or(1600, |w| w.floor().clamp(2.0, 1e9) as u64);
        let quality = finite(&params, "quality").unwrap_or(0.9).clamp(0.05, 1.0);
        let delay_ms = finite(&params, "delayMs")
            .unwrap_or(2000.0)
            .floor()
            .clamp(0.0, 10_000.0) as u64;
        // JavaScript's Math.round: halves go up.
        let q = (31.0 - quality * 29.0 + 0.5).floor() as i64;
        let dir = scratch()?;
        let out = dir.path().join("capture.jpg");
        let args = [
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "v4l2",
            "-i",
            &device.id,
            "-ss",
            &format!("{:.3}", delay_ms as f64 / 1000.0),
            "-frames:v",
            "1",
            "-vf",
            &format!("scale=min(iw\\,{max_width}):-2"),
            "-q:v",
            &q.to_string(),
        ];
        let image = capture(
            &ffmpeg,
            &args,
            &out,
            Duration::from_millis(delay_ms + 20_000),
        )
        .await?;
        let Some((width, height)) = jpeg_size(&image) else {
            return Err(failure(
                "CAMERA_UNAVAILABLE: FFmpeg returned an invalid JPEG",
            ));
        };
        Ok(json!({
            "format": format,
            "base64": encode(&image)?,
            "width": width,
            "height": height,
        }))
    })
    .await
}

/// `camera.clip`: `{format: "mp4", base64, durationMs, hasAudio}`. Sound
/// is recorded only where the owner allowed the microphone (`audio`);
/// elsewhere a clip asking for it is silent and says so (`hasAudio: false`).
pub async fn clip(params: Value, audio: bool, budget: Duration) -> Result<Value, ToolError> {
    let ffmpeg = ffmpeg().ok_or_else(|| failure("CAMERA_UNAVAILABLE: ffmpeg not found"))?;
    let format = format(&params, "mp4");
    if format != "mp4" {
        return Err(failure(format!(
            "INVALID_REQUEST: unsupported camera clip format: {format}"
        )));
    }
    within(budget, async {
        let _one = CAPTURING.lock().await;
        let device = choose(&ffmpeg, &params["deviceId"]).await?;
        let duration_ms = finite(&params, "durationMs")
            .unwrap_or(3000.0)
            .floor()
            .clamp(250.0, 60_000.0) as u64;
        let with_audio = audio && params["includeAudio"].as_bool().unwrap_or(true);
        let dir = scratch()?;
        let out = dir.path().join("capture.mp4");
        let seconds = format!("{:.3}", duration_ms as f64 / 1000.0);
        let mut args = vec!["-hide_banner", "-loglevel", "error", "-y"];
        args.extend(["-f", "v4l2", "-i", &device.id]);
        if with_audio {
            args.extend(["-f", "pulse", "-i", "default"]);
        }
        args.extend(["-t", &seconds, "-c:v", "libx264", "-preset", "veryfast"]);
        args.extend(["-pix_fmt", "yuv420p"]);
        if with_audio {
            args.extend(["-map", "0:v:0", "-map", "1:a:0", "-c:a", "aac"]);
            args.extend(["-b:a", "128k", "-shortest"]);
        } else {
            args.push("-an");
        }
        args.extend(["-movflags", "+faststart"]);
        let clip = capture(
            &ffmpeg,
            &args,
            &out,
            Duration::from_millis(duration_ms + 30_000),
        )
        .await?;
        Ok(json!({
            "format": "mp4",
            "base64": encode(&clip)?,
            "durationMs": duration_ms,
            "hasAudio": with_audio,
        }))
    })
    .await
}

/// A private directory for one capture, gone with it.
fn scratch() -> Result<tempfile::TempDir, ToolError> {
    tempfile::Builder::new()
        .prefix("clawbot-camera-")
        .tempdir()
        .map_err(|e| failure(format!("CAMERA_UNAVAILABLE: {e}")))
}

/// Runs FFmpeg with `args` then `out`, and reads what it wrote there
/// (refused unread when it is too big to carry).
async fn capture(
    ffmpeg: &Path,
    args: &[&str],
    out: &Path,
    timeout: Duration,
) -> Result<Vec<u8>, ToolError> {
    let mut argv: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    argv.push(out.into());
    let outcome = Job::new("CAMERA_UNAVAILABLE", ffmpeg, argv, timeout)
        .run(std::future::pending())
        .await?;
    check(&outcome, "CAMERA_UNAVAILABLE")?;
    read_media(out)
}

fn too_large() -> ToolError {
    failure("PAYLOAD_TOO_LARGE: camera payload exceeds the 25 MB base64 limit")
}

fn read_media(path: &Path) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|_| failure("CAMERA_UNAVAILABLE: FFmpeg wrote no capture"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
    if size > MAX_RAW {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // Bounded even if it grows while read.
    file.take(MAX_RAW + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failure(format!("CAMERA_UNAVAILABLE: {e}")))?;
    if bytes.len() as u64 > MAX_RAW {
        return Err(too_large());
    }
    Ok(bytes)
}

fn encode(bytes: &[u8]) -> Result<String, ToolError> {
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    if text.len() > MAX_BASE64 {
        return Err(too_large());
    }
    Ok(text)
}

/// The caller's time: past it, the capture is stopped (the runner stops
/// FFmpeg's tree when its future is dropped).
async fn within(
    budget: Duration,
    work: impl std::future::Future<Output = Result<Value, ToolError>>,
) -> Result<Value, ToolError> {
    tokio::time::timeout(budget, work)
        .await
        .unwrap_or_else(|_| Err(failure("CAMERA_UNAVAILABLE: command timed out")))
}

/// A JPEG's width and height from its first frame header (OpenClaw's
/// `readJpegDimensions`); `None` for anything else.
pub(in crate::tools) fn jpeg_size(b: &[u8]) -> Option<(u16, u16)> {
    if b.len() < 4 || b[0] != 0xFF || b[1] != 0xD8 {
        return None;
    }
    let be = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let mut at = 2;
    while at + 9 < b.len() {
        if b[at] != 0xFF {
            at += 1;
            continue;
        }
        let marker = b[at + 1];
        if marker == 0xFF {
            at += 1;
            continue;
        }
        if marker == 0xD9 || marker == 0xDA {
            return None;
        }
        let length = be(at + 2);
        let frame = matches!(marker, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF);
        if frame && length >= 7 {
            return Some((be(at + 7), be(at + 5)));
        }
        if length < 2 {
            return None;
        }
        at += usize::from(length) + 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 JPEG as FFmpeg writes one.
    pub const TINY_JPEG: &[u8] = &[
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
        0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x01, 0x01, 0x11, 0x00, 0xFF, 0xD9,
    ];

    #[test]
    fn a_jpeg_size_comes_from_its_frame_header() {
        assert_eq!(jpeg_size(TINY_JPEG), Some((640, 480)));
        assert_eq!(jpeg_size(b"\x89PNG\r\n\x1a\n........"), None);
        assert_eq!(jpeg_size(&TINY_JPEG[..20]), None);
        // A start of scan before any frame header: not an image we can size.
        let mut sos = TINY_JPEG.to_vec();
        sos[21] = 0xDA;
        assert_eq!(jpeg_size(&sos), None);
        // A segment length that would loop forever ends the walk.
        let mut zero = TINY_JPEG.to_vec();
        zero[21] = 0xE1;
        zero[22] = 0;
        zero[23] = 0;
        assert_eq!(jpeg_size(&zero), None);
    }

    #[test]
    fn formats_are_listed_only_where_ffmpeg_names_raw_or_compressed_ones() {
        assert!(lists_formats(
            "[video4linux2,v4l2 @ 0x1] Raw       :     yuyv422 :  YUYV 4:2:2 : 640x480"
        ));
        assert!(lists_formats("Compressed: mjpeg"));
        assert!(!lists_formats("Rawness : x"));
        assert!(!lists_formats("Unraw : x"));
        assert!(!lists_formats(
            "/dev/video0: Inappropriate ioctl for device"
        ));
    }

    #[test]
    fn a_capture_too_big_to_carry_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_RAW + 1).unwrap();
        assert_eq!(
            read_media(&big).unwrap_err().message,
            "Error: PAYLOAD_TOO_LARGE: camera payload exceeds the 25 MB base64 limit"
        );
        f.set_len(MAX_RAW).unwrap();
        assert_eq!(read_media(&big).unwrap().len() as u64, MAX_RAW);
        assert!(encode(&vec![0; MAX_RAW as usize]).unwrap().len() <= MAX_BASE64);
    }
}
