//! The one way every mode learns it was told to stop.

use std::future::Future;

/// A signal that told us to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupt {
    pub name: &'static str,
    pub number: i32,
}

/// Cancelled when the process is told to stop (a link's whole life).
pub fn stopped() -> tokio_util::sync::CancellationToken {
    let stop = tokio_util::sync::CancellationToken::new();
    let cancel = stop.clone();
    let signal = interrupts();
    tokio::spawn(async move {
        signal.await;
        cancel.cancel();
    });
    stop
}

/// Resolves when the process is told to stop: SIGINT, SIGTERM or SIGHUP
/// on Unix; Ctrl-C, Ctrl-Break or the console closing on Windows. Every
/// mode stops on the same signals through here.
pub fn interrupts() -> impl Future<Output = Interrupt> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        let hup = signal(SignalKind::hangup());
        async move {
            let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (int, term, hup) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = int.recv() => Interrupt { name: "SIGINT", number: libc::SIGINT },
                _ = term.recv() => Interrupt { name: "SIGTERM", number: libc::SIGTERM },
                _ = hup.recv() => Interrupt { name: "SIGHUP", number: libc::SIGHUP },
            }
        }
    }
    #[cfg(windows)]
    {
        // Ctrl-C, Ctrl-Break, and the console window closing (Windows then
        // allows a few seconds before it ends the process).
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        let (c, brk, close) = (ctrl_c(), ctrl_break(), ctrl_close());
        async move {
            let (Ok(mut c), Ok(mut brk), Ok(mut close)) = (c, brk, close) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = c.recv() => Interrupt { name: "Ctrl-C", number: 2 },
                _ = brk.recv() => Interrupt { name: "Ctrl-Break", number: 21 },
                _ = close.recv() => Interrupt { name: "CTRL_CLOSE_EVENT", number: 1 },
            }
        }
    }
}
