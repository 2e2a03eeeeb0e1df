// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Module parameters of this guest's rrdma: read, written, or set for the
//! length of a check.

/// A module parameter set while this lives, then restored.
pub(crate) struct ModParam {
    name: &'static str,
    /// What to restore; `None` once [`ModParam::restore`] did.
    was: Option<String>,
}

impl ModParam {
    fn path(name: &str) -> String {
        format!("/sys/module/rrdma/parameters/{name}")
    }

    /// The value of `name`.
    pub(crate) fn get(name: &str) -> Result<String, String> {
        std::fs::read_to_string(Self::path(name))
            .map(|v| v.trim().to_string())
            .map_err(|e| format!("{name}: {e}"))
    }

    /// Writes `value` to `name` (and leaves it there).
    pub(crate) fn write(name: &str, value: &str) -> Result<(), String> {
        std::fs::write(Self::path(name), value).map_err(|e| format!("{name}={value}: {e}"))
    }

    /// Sets `name` to `value`, remembering what it was.
    pub(crate) fn set(name: &'static str, value: &str) -> Result<Self, String> {
        let was = Self::get(name)?;
        Self::write(name, value)?;
        Ok(Self {
            name,
            was: Some(was),
        })
    }

    /// Restores the value `name` had, for a check to report.
    pub(crate) fn restore(mut self) -> Result<(), String> {
        match self.was.take() {
            Some(was) => Self::write(self.name, &was),
            None => Ok(()),
        }
    }
}

impl Drop for ModParam {
    fn drop(&mut self) {
        if let Some(was) = self.was.take() {
            if let Err(e) = Self::write(self.name, &was) {
                eprintln!("cannot restore {e}");
            }
        }
    }
}
