//! What the sql-sync tests share: the function's logs captured, and migrations in the form
//! `SqlSync::migrate` takes.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

/// What sql-sync logs while the guard [`Logs::capture`] returns lives (its `tracing` output, on
/// this thread).
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Starts capturing; the capture ends when the guard is dropped.
    pub fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Owned migrations `(version, name, sql)` as `SqlSync::migrate` takes them.
pub fn borrowed(migrations: &[(u32, String, String)]) -> Vec<(u32, &str, &str)> {
    migrations
        .iter()
        .map(|(v, name, sql)| (*v, name.as_str(), sql.as_str()))
        .collect()
}
