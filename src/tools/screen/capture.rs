//! One picture of the X display: its size asked of the X server, one
//! frame grabbed by FFmpeg's `x11grab`, scaled and encoded in the same
//! run into a private temporary directory, and its delivered size read
//! back from the image's own header (PNG `IHDR`, JPEG `SOF`), so the
//! width and height we answer are those of the bytes we send.
//!
//! Sizes follow OpenClaw's reference provider (`cua-computer` with its
//! image library, rastermill): `maxWidth` bounds the longest side, the
//! picture is never enlarged, each side is `round(side × scale)`; JPEG
//! quality `q` (0.05–1) is rastermill's FFmpeg mapping
//! `-q:v clamp(round(31 − round(q·100)·0.29), 2, 31)`.
//!
//! Must never: read an image bigger than the gateway can carry (checked
//! on its size before reading), or leave FFmpeg or its file behind.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use super::{Desktop, error};
use crate::tools::ToolError;
use crate::tools::sensors::{camera, check};

/// The X screen's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

/// An encoded picture and its size.
pub struct Picture {
    pub bytes: Vec<u8>,
    pub size: Size,
}

/// The largest screen x11grab is asked to grab (a 16K display).
const MAX_SIDE: u32 = 16_384;

/// The delivered size of a `native` picture whose longest side may be at
/// most `max_side` (rastermill's `fit: inside`, `enlarge: false`).
pub fn delivered(native: Size, max_side: f64) -> Size {
    let (w, h) = (f64::from(native.width), f64::from(native.height));
    let scale = (max_side / w).min(max_side / h).min(1.0);
    // JavaScript's Math.round: halves go up.
    let side = |n: f64| ((n * scale + 0.5).floor() as u32).max(1);
    Size {
        width: side(w),
        height: side(h),
    }
}

/// FFmpeg's `-q:v` for a JPEG of quality `q` (rastermill's mapping).
pub fn jpeg_qv(q: f64) -> i64 {
    let percent = (q.clamp(0.05, 1.0) * 100.0 + 0.5).floor();
    ((31.0 - percent * 0.29 + 0.5).floor() as i64).clamp(2, 31)
}

/// The screen's size now: `xdotool getdisplaygeometry` where xdotool is
/// found (fast), else FFmpeg's prober asked about the x11grab input.
pub async fn screen_size(desktop: &Desktop, budget: Duration) -> Result<Size, ToolError> {
    let (program, args): (&Path, Vec<OsString>) = match &desktop.xdotool {
        Some(xdotool) => (xdotool, vec!["getdisplaygeometry".into()]),
        None => (
            &desktop.ffprobe,
            [
                "-v",
                "error",
                "-f",
                "x11grab",
                "-i",
                desktop.display,
                "-show_entries",
                "stream=width,height",
                "-of",
                "csv=p=0",
            ]
            .iter()
            .map(Into::into)
            .collect(),
        ),
    };
    let outcome = desktop.job(program, args, budget).run(pending()).await?;
    check(&outcome, "COMPUTER_DRIVER_UNAVAILABLE")?;
    let said = format!("{}{}", outcome.output.head, outcome.output.tail);
    parse_size(&said).ok_or_else(|| {
        error(format!(
            "COMPUTER_DRIVER_ERROR: unreadable display geometry {:?}",
            crate::tools::js::truncate_utf16(said.trim(), 80)
        ))
    })
}

fn pending() -> std::future::Pending<()> {
    std::future::pending()
}

/// `W H` (xdotool) or `W,H` (ffprobe).
fn parse_size(said: &str) -> Option<Size> {
    let mut numbers = said
        .trim()
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u32>().ok().filter(|n| (1..=MAX_SIDE).contains(n)));
    let size = Size {
        width: numbers.next()??,
        height: numbers.next()??,
    };
    numbers.next().is_none().then_some(size)
}

/// Grabs the whole `native` screen once and encodes it as `format`, at
/// most `max_side` on its longest side.
pub async fn grab(
    desktop: &Desktop,
    native: Size,
    png: bool,
    max_side: f64,
    quality: f64,
    budget: Duration,
) -> Result<Picture, ToolError> {
    let target = delivered(native, max_side);
    let dir = tempfile::Builder::new()
        .prefix("clawbot-screen-")
        .tempdir()
        .map_err(|e| error(format!("COMPUTER_DRIVER_ERROR: {e}")))?;
    let out = dir
        .path()
        .join(if png { "screen.png" } else { "screen.jpg" });
    let mut args: Vec<OsString> = [
        "-hide_banner",
        "-loglevel",
        "error",
        "-nostdin",
        "-y",
        "-f",
        "x11grab",
        "-video_size",
        &format!("{}x{}", native.width, native.height),
        "-i",
        &format!("{}+0,0", desktop.display),
        "-frames:v",
        "1",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if target != native {
        args.extend(["-vf".into(), scale(target).into()]);
    }
    if !png {
        args.extend(["-q:v".into(), jpeg_qv(quality).to_string().into()]);
    }
    args.push(out.clone().into());
    let outcome = desktop
        .job(&desktop.ffmpeg, args, budget)
        .run(pending())
        .await?;
    check(&outcome, "COMPUTER_DRIVER_ERROR")?;
    let bytes = read_capped(&out)?;
    let size = if png { png_size(&bytes) } else { jpeg(&bytes) };
    let size =
        size.ok_or_else(|| error("COMPUTER_DRIVER_ERROR: FFmpeg returned an invalid image"))?;
    Ok(Picture { bytes, size })
}

fn scale(to: Size) -> String {
    format!("scale=w={}:h={}", to.width, to.height)
}

fn jpeg(bytes: &[u8]) -> Option<Size> {
    camera::jpeg_size(bytes).map(|(w, h)| Size {
        width: w.into(),
        height: h.into(),
    })
}

/// A PNG's width and height from its `IHDR`, the chunk that must come
/// first.
pub fn png_size(b: &[u8]) -> Option<Size> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if b.len() < 24 || &b[..8] != SIGNATURE || &b[12..16] != b"IHDR" {
        return None;
    }
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let size = Size {
        width: be(16),
        height: be(20),
    };
    (size.width > 0 && size.height > 0).then_some(size)
}

/// The capture, refused unread when its base64 would not fit what the
/// gateway carries (OpenClaw's 25 MB media limit).
fn read_capped(path: &Path) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let limit = (camera::MAX_BASE64 / 4 * 3) as u64;
    let too_large = || error("PAYLOAD_TOO_LARGE: screen snapshot exceeds the 25 MB base64 limit");
    let file = std::fs::File::open(path)
        .map_err(|_| error("COMPUTER_DRIVER_ERROR: FFmpeg wrote no picture"))?;
    if file.metadata().map_or(u64::MAX, |m| m.len()) > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(format!("COMPUTER_DRIVER_ERROR: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(width: u32, height: u32) -> Size {
        Size { width, height }
    }

    #[test]
    fn the_longest_side_is_bounded_and_nothing_is_enlarged() {
        // What `openclaw node run` delivered for a 1024×768 Xvfb (bar 20).
        assert_eq!(delivered(size(1024, 768), 900.0), size(900, 675));
        assert_eq!(delivered(size(1024, 768), 640.0), size(640, 480));
        assert_eq!(delivered(size(1024, 768), 1600.0), size(1024, 768));
        assert_eq!(delivered(size(768, 1024), 640.0), size(480, 640));
        // 1366 × 900/1366 = 506.03…; halves round up.
        assert_eq!(delivered(size(1366, 768), 900.0), size(900, 506));
        assert_eq!(delivered(size(3, 1), 2.0), size(2, 1));
        assert_eq!(delivered(size(1024, 768), 1.0), size(1, 1));
        assert_eq!(delivered(size(1024, 768), 1e300), size(1024, 768));
    }

    #[test]
    fn jpeg_quality_maps_as_rastermills_ffmpeg_backend() {
        assert_eq!(jpeg_qv(0.72), 10); // the default
        assert_eq!(jpeg_qv(0.85), 6); // the computer tool's
        assert_eq!(jpeg_qv(1.0), 2);
        assert_eq!(jpeg_qv(0.0), 30);
        assert_eq!(jpeg_qv(-5.0), 30);
        assert_eq!(jpeg_qv(9.0), 2);
    }

    #[test]
    fn sizes_are_read_from_either_geometry_program() {
        assert_eq!(parse_size("1024 768\n"), Some(size(1024, 768)));
        assert_eq!(parse_size("1024,768\n"), Some(size(1024, 768)));
        for bad in ["", "1024", "0 768", "1024 768 3", "a b", "99999 1", "-1 5"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_png_size_comes_from_its_header() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend(900u32.to_be_bytes());
        png.extend(675u32.to_be_bytes());
        assert_eq!(png_size(&png), Some(size(900, 675)));
        assert_eq!(png_size(&png[..20]), None);
        let mut zero = png.clone();
        zero[16..20].copy_from_slice(&[0; 4]);
        assert_eq!(png_size(&zero), None);
        let mut other = png.clone();
        other[12] = b'X';
        assert_eq!(png_size(&other), None);
    }
}
