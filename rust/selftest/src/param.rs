// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Module parameters of this guest's rrdma, set for the length of a check.

/// A module parameter set while this lives, then restored.
pub(crate) struct ModParam {
    name: &'static str,
    was: String,
}

impl ModParam {
    fn path(name: &str) -> String {
        format!("/sys/module/rrdma/parameters/{name}")
    }

    /// Sets `name` to `value`, remembering what it was.
    pub(crate) fn set(name: &'static str, value: &str) -> Result<Self, String> {
        let path = Self::path(name);
        let was = std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"))?;
        std::fs::write(&path, value).map_err(|e| format!("{name}={value}: {e}"))?;
        Ok(Self {
            name,
            was: was.trim().to_string(),
        })
    }
}

impl Drop for ModParam {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(Self::path(self.name), &self.was) {
            eprintln!("cannot restore {}: {e}", self.name);
        }
    }
}
