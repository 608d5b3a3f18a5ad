//! The sensors' stand-ins (tests/fixtures/sensors): no camera or GeoClue
//! exists here, so `ffmpeg` and `where-am-i` are scripts on PATH that
//! record their command lines, and camera devices are plain files under a
//! test root (`CLAWBOT_TEST_V4L2_ROOT`, read by debug builds only).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::gateway::{Config, FakeGateway, TOKEN};
use super::node::{LONG, Node};

/// A 640×480 JPEG header, as FFmpeg starts one.
pub const JPEG: &[u8] = &[
    0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xFF,
    0xC0, 0x00, 0x0B, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x01, 0x01, 0x11, 0x00, 0xFF, 0xD9,
];

/// The stand-ins' world: a PATH with them first, a log of their command
/// lines, a capture to hand out, and a device tree.
pub struct World {
    dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("v4l2");
        std::fs::create_dir_all(root.join("dev")).unwrap();
        for dev in ["video0", "video1", "video2", "video10", "videox", "vbi0"] {
            std::fs::write(root.join("dev").join(dev), "").unwrap();
        }
        std::fs::create_dir_all(root.join("video4linux/video0")).unwrap();
        std::fs::write(
            root.join("video4linux/video0/name"),
            "  Integrated Camera: Integrated C\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("capture.jpg"), JPEG).unwrap();
        World { dir }
    }

    pub fn device(&self, n: &str) -> String {
        self.dir
            .path()
            .join("v4l2/dev")
            .join(n)
            .to_string_lossy()
            .into_owned()
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path().join("standin.log")
    }

    pub fn logged(&self) -> Vec<String> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn forget(&self) {
        let _ = std::fs::remove_file(self.log());
    }

    /// The variables a node (or `openclaw node run`) needs to find them.
    pub fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, PathBuf)> {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sensors");
        let path = format!(
            "{}:{}",
            fixtures.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut env = vec![
            ("PATH".to_owned(), PathBuf::from(path)),
            ("STANDIN_LOG".to_owned(), self.log()),
            (
                "STANDIN_CAPTURE".to_owned(),
                self.dir.path().join("capture.jpg"),
            ),
            (
                "STANDIN_CAMERAS".to_owned(),
                PathBuf::from(format!(
                    "{} {}",
                    self.device("video0"),
                    self.device("video10")
                )),
            ),
            (
                "CLAWBOT_TEST_V4L2_ROOT".to_owned(),
                self.dir.path().join("v4l2"),
            ),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), PathBuf::from(v))));
        env
    }

    /// Waits until the stand-in a call started is gone (nothing outlives
    /// the call).
    pub fn wait_gone(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.hung_alive() {
            assert!(Instant::now() < deadline, "the stand-in outlived the call");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The first command line that was not a camera probe: the capture.
    pub fn capture(&self) -> String {
        self.logged()
            .into_iter()
            .find(|l| !l.contains("-list_formats"))
            .unwrap_or_else(|| panic!("no capture ran: {:?}", self.logged()))
    }

    /// A node on the fake gateway with these stand-ins (and `extra`
    /// variables) on its PATH, started with `args`.
    pub async fn node(&self, args: &[&str], extra: &[(&str, &str)]) -> (FakeGateway, Node) {
        let gw = FakeGateway::start(Config::default()).await;
        let env = self.env(extra);
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (k.as_str(), v.as_path())).collect();
        let mut all = vec!["--token", TOKEN];
        all.extend(args);
        let node = Node::start_with_env(&gw.url(), &all, &env);
        gw.wait_hellos(1, LONG).await;
        (gw, node)
    }

    /// The stand-in a test made hang, still running?
    pub fn hung_alive(&self) -> bool {
        let Ok(pid) = std::fs::read_to_string(format!("{}.pid", self.log().display())) else {
            return false;
        };
        Path::new("/proc").join(pid.trim()).exists()
    }
}
