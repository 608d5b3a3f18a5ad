//! Who drives the screen, and in which coordinates: OpenClaw's provider
//! executions and display frames (`registerComputerUseProvider` and the
//! reference provider's `frame.ts`).
//!
//! One execution at a time owns the pointer and keyboard: a call naming
//! another gets `COMPUTER_HOST_BUSY`, until the owner closes it
//! (`__close_execution`), the gateway connection drops, or it has been
//! idle for [`IDLE`] (OpenClaw keeps an abandoned one until the node
//! disconnects; an agent that died must not lock the desktop for hours).
//! Each snapshot taken inside an execution issues a frame, and only that
//! last frame's id may place a coordinate: anything else is
//! `COMPUTER_STALE_FRAME` and forgets the frame, as OpenClaw does.
//!
//! Must never: place a point outside the screen it was captured from, or
//! let a frame outlive the geometry or the reference width it was issued
//! for.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::capture::Size;
use super::error;
use crate::tools::ToolError;

/// An execution untouched this long is closed when another asks.
pub const IDLE: Duration = Duration::from_secs(300);

/// A picture's coordinate space, as the agent was given it.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: String,
    /// The `maxWidth` it was taken with: what the agent's `refWidth` says.
    reference_width: f64,
    native: Size,
    delivered: Size,
}

#[derive(Debug)]
pub struct Execution {
    pub id: String,
    frame: Option<Frame>,
    /// `left_mouse_down` pressed the left button and nothing released it.
    pub button_held: bool,
    used: Instant,
}

/// The executions of one desktop.
#[derive(Debug, Default)]
pub struct Executions {
    current: Option<Execution>,
    issued: u64,
}

impl Executions {
    /// Enters execution `id`, opening it when none is open. Another one
    /// open is `COMPUTER_HOST_BUSY`, unless idle past [`IDLE`]: then it is
    /// closed and returned (its held button is the caller's to release).
    pub fn enter(&mut self, id: &str) -> Result<Option<Execution>, ToolError> {
        let mut expired = None;
        if let Some(open) = &self.current
            && open.id != id
        {
            if open.used.elapsed() < IDLE {
                return Err(error(
                    "COMPUTER_HOST_BUSY: another provider execution owns this computer",
                ));
            }
            expired = self.current.take();
        }
        let open = self.current.get_or_insert_with(|| Execution {
            id: id.to_owned(),
            frame: None,
            button_held: false,
            used: Instant::now(),
        });
        open.used = Instant::now();
        Ok(expired)
    }

    /// The execution entered last.
    pub fn current(&mut self) -> Option<&mut Execution> {
        self.current.as_mut()
    }

    /// Closes execution `id` (any, with `None`) if it is the open one.
    pub fn close(&mut self, id: Option<&str>) -> Option<Execution> {
        match &self.current {
            Some(open) if id.is_none_or(|id| id == open.id) => self.current.take(),
            _ => None,
        }
    }

    /// A new frame's id: opaque, never issued before on this node.
    pub fn issue(
        &mut self,
        generation: &str,
        native: Size,
        delivered: Size,
        reference_width: f64,
    ) -> Frame {
        self.issued += 1;
        let seed = serde_json::json!([
            generation,
            [native.width, native.height],
            [delivered.width, delivered.height],
            reference_width,
            self.issued
        ]);
        let digest = Sha256::digest(seed.to_string().as_bytes());
        Frame {
            id: format!("x11:v1:{}", crate::shared::hex::hex(&digest)),
            reference_width,
            native,
            delivered,
        }
    }
}

impl Execution {
    pub fn remember(&mut self, frame: Frame) {
        self.frame = Some(frame);
    }

    /// The frame a coordinate call may use: the last one issued, echoed by
    /// id, for the screen as it still is, in the width it was taken at.
    pub fn verify(
        &mut self,
        echoed: Option<&str>,
        screen: Size,
        ref_width: Option<f64>,
    ) -> Result<Frame, ToolError> {
        let stale = |what: &str| {
            error(format!(
                "COMPUTER_STALE_FRAME: {what}; take a new screenshot"
            ))
        };
        let Some(frame) = self
            .frame
            .take()
            .filter(|f| echoed.is_some_and(|e| e == f.id))
        else {
            return Err(stale(
                "the coordinate frame is missing or no longer current",
            ));
        };
        if screen != frame.native {
            return Err(stale("the primary display geometry changed"));
        }
        let width = ref_width.unwrap_or(f64::NAN);
        if width != frame.reference_width && width != f64::from(frame.delivered.width) {
            return Err(stale("the coordinate reference width changed"));
        }
        self.frame = Some(frame.clone());
        Ok(frame)
    }
}

impl Frame {
    /// A point of the delivered picture on the screen (the reference
    /// provider's `scalePoint`); `label` names it in errors.
    pub fn place(
        &self,
        x: Option<f64>,
        y: Option<f64>,
        label: &str,
    ) -> Result<(u32, u32), ToolError> {
        let (Some(x), Some(y)) = (x, y) else {
            return Err(error(format!(
                "COMPUTER_INVALID_REQUEST: {label} coordinates are required"
            )));
        };
        let (dw, dh) = (
            f64::from(self.delivered.width),
            f64::from(self.delivered.height),
        );
        if x >= dw || y >= dh {
            return Err(error(format!(
                "COMPUTER_INVALID_REQUEST: {label} coordinates are outside the captured primary-display frame"
            )));
        }
        let axis = |v: f64, native: u32, delivered: f64| {
            // JavaScript's Math.round; never past the last pixel.
            let n = (v * f64::from(native) / delivered + 0.5).floor();
            (n as u32).min(native - 1)
        };
        Ok((
            axis(x, self.native.width, dw),
            axis(y, self.native.height, dh),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6f";
    const B: &str = "1b5c3f0e-8d1a-4c2b-9e7f-1a2b3c4d5e6f";

    fn size(width: u32, height: u32) -> Size {
        Size { width, height }
    }

    #[test]
    fn one_execution_at_a_time_until_it_is_closed() {
        let mut e = Executions::default();
        assert!(e.enter(A).unwrap().is_none());
        assert!(e.enter(A).unwrap().is_none());
        assert_eq!(
            e.enter(B).unwrap_err().message,
            "Error: COMPUTER_HOST_BUSY: another provider execution owns this computer"
        );
        // Closing someone else's is a no-op.
        assert!(e.close(Some(B)).is_none());
        assert_eq!(e.close(Some(A)).unwrap().id, A);
        assert!(e.enter(B).unwrap().is_none());
        assert_eq!(e.close(None).unwrap().id, B);
        assert!(e.current().is_none());
    }

    #[test]
    fn an_idle_execution_gives_way() {
        let mut e = Executions::default();
        e.enter(A).unwrap();
        let open = e.current().unwrap();
        open.button_held = true;
        open.used = Instant::now() - IDLE;
        let expired = e.enter(B).unwrap().unwrap();
        assert_eq!(expired.id, A);
        assert!(expired.button_held);
        assert_eq!(e.current().unwrap().id, B);
    }

    #[test]
    fn frames_are_never_issued_twice() {
        let mut e = Executions::default();
        let (n, d) = (size(1024, 768), size(640, 480));
        let one = e.issue("g", n, d, 640.0);
        let two = e.issue("g", n, d, 640.0);
        assert_ne!(one.id, two.id);
        assert!(one.id.starts_with("x11:v1:") && one.id.len() == 7 + 64);
    }

    #[test]
    fn only_the_last_frame_for_the_same_screen_and_width_places_points() {
        let mut e = Executions::default();
        e.enter(A).unwrap();
        let frame = e.issue("g", size(1024, 768), size(640, 480), 1280.0);
        let open = e.current().unwrap();
        open.remember(frame.clone());
        let screen = size(1024, 768);
        let ok = open.verify(Some(&frame.id), screen, Some(1280.0)).unwrap();
        assert_eq!(ok, frame);
        // The delivered width is as good as the reference width.
        open.verify(Some(&frame.id), screen, Some(640.0)).unwrap();
        let stale = "Error: COMPUTER_STALE_FRAME: ";
        let e1 = open.verify(Some("x11:v1:forged"), screen, Some(640.0));
        assert_eq!(
            e1.unwrap_err().message,
            format!(
                "{stale}the coordinate frame is missing or no longer current; take a new screenshot"
            )
        );
        // ... and the frame is forgotten: the right id no longer works.
        assert!(open.verify(Some(&frame.id), screen, Some(640.0)).is_err());
        open.remember(frame.clone());
        let e2 = open.verify(Some(&frame.id), size(800, 600), Some(640.0));
        assert!(e2.unwrap_err().message.contains("geometry changed"));
        open.remember(frame.clone());
        let e3 = open.verify(Some(&frame.id), screen, Some(900.0));
        assert!(e3.unwrap_err().message.contains("reference width changed"));
        open.remember(frame.clone());
        let e4 = open.verify(Some(&frame.id), screen, None);
        assert!(e4.unwrap_err().message.contains("reference width changed"));
        open.remember(frame.clone());
        assert!(open.verify(None, screen, Some(640.0)).is_err());
    }

    #[test]
    fn points_scale_to_the_screen_and_stay_on_it() {
        let frame = Executions::default().issue("g", size(1024, 768), size(640, 480), 640.0);
        // Bar 20: (320, 240) of a 640-wide frame of a 1024×768 screen.
        assert_eq!(
            frame.place(Some(320.0), Some(240.0), "x").unwrap(),
            (512, 384)
        );
        assert_eq!(frame.place(Some(0.0), Some(0.0), "x").unwrap(), (0, 0));
        assert_eq!(
            frame.place(Some(639.9), Some(479.9), "x").unwrap(),
            (1023, 767)
        );
        let outside = frame
            .place(Some(640.0), Some(0.0), "left_click")
            .unwrap_err();
        assert_eq!(
            outside.message,
            "Error: COMPUTER_INVALID_REQUEST: left_click coordinates are outside the captured primary-display frame"
        );
        assert!(frame.place(Some(1e308), Some(0.0), "x").is_err());
        assert_eq!(
            frame
                .place(Some(1.0), None, "drag start")
                .unwrap_err()
                .message,
            "Error: COMPUTER_INVALID_REQUEST: drag start coordinates are required"
        );
    }
}
